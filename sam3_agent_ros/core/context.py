"""Pure context management: the main conversation is kept as turns and re-rendered, pruned, for
every request (CONTRACTS §2).

A turn is one assistant reply plus the user message that answered it (a tool result or a
correction), so pruning never separates a call from its result. The rendered request is:

    [system, first user message (raw frame + query [+ warning]), *kept turns]

- kept turns: the latest turn that executed ``segment_phrase`` and every turn after it (before any
  segment ran: all turns), trimmed to ``max_messages`` by dropping the oldest turns after the
  segment turn;
- only the newest image among the kept turns survives (older overlays become a text note), so a
  request carries at most 2 images: the raw frame and the current overlay;
- once an executed prompt has been replaced, the first user message lists it as not to be reused.
"""

from __future__ import annotations

from dataclasses import dataclass

from sam3_agent_ros.core.types import ImagePart, Message

IMAGE_OMITTED = "[older overlay image omitted; the latest one below shows the current masks]"


@dataclass(frozen=True)
class Turn:
    assistant: Message
    answer: Message  # user role: tool result or correction
    executed_segment: bool = False


def first_user_message(frame_image: ImagePart, query: str, width: int, height: int,
                       replaced_prompts: list[str]) -> Message:
    text = (f"The image is the current camera frame ({width}x{height} px; x grows to the right, "
            f"y grows downwards).\nUser query: {query}")
    if replaced_prompts:
        listed = ", ".join(f'"{p}"' for p in replaced_prompts)
        text += (f"\n\nNote: these text_prompts were already tried and their results replaced: "
                 f"{listed}. Do not use any of them again.")
    return Message("user", (frame_image, text))


def kept_turns(turns: list[Turn], max_messages: int) -> list[Turn]:
    """The turns that go into the next request, within the message bound."""
    start = 0
    for index in range(len(turns) - 1, -1, -1):
        if turns[index].executed_segment:
            start = index
            break
    tail = turns[start:]
    budget = max(1, (max_messages - 2) // 2)
    if len(tail) <= budget:
        return tail
    if tail[0].executed_segment and budget >= 2:
        return [tail[0], *tail[len(tail) - (budget - 1):]]
    return tail[len(tail) - budget:]


def _strip_images(message: Message) -> Message:
    content = tuple(IMAGE_OMITTED if isinstance(p, ImagePart) else p for p in message.content)
    return Message(message.role, content)


def build_messages(system: Message, first_user: Message, turns: list[Turn],
                   max_messages: int) -> list[Message]:
    """Render the next main-loop request from the whole history of turns."""
    kept = kept_turns(turns, max_messages)
    newest_with_image = max((i for i, t in enumerate(kept) if t.answer.images), default=-1)
    messages = [system, first_user]
    for index, turn in enumerate(kept):
        answer = turn.answer if index == newest_with_image else _strip_images(turn.answer)
        messages += [turn.assistant, answer]
    return messages


def check_messages(messages: list[Message], max_messages: int) -> str | None:
    """Return what is wrong with a request w.r.t. CONTRACTS §2, or None when it is valid."""
    if len(messages) < 2:
        return f"request has {len(messages)} messages, needs at least system + user"
    if messages[0].role != "system" or messages[0].images:
        return "messages[0] must be the system prompt without images"
    if messages[1].role != "user" or len(messages[1].images) != 1:
        return "messages[1] must be the user message with the raw frame"
    if len(messages) > max_messages:
        return f"{len(messages)} messages exceed agent.max_context_messages={max_messages}"
    images = sum(len(m.images) for m in messages)
    if images > 2:
        return f"{images} images in one request (at most 2)"
    for index, message in enumerate(messages[2:], start=2):
        expected = "assistant" if index % 2 == 0 else "user"
        if message.role != expected:
            return f"messages[{index}] has role {message.role}, expected {expected}"
    if messages[-1].role != "user":
        return "the last message must be a user message"
    return None


def count_images(messages: list[Message]) -> int:
    return sum(len(m.images) for m in messages)

"""Pure context management: the main conversation is kept as turns and re-rendered, pruned, for
every request (CONTRACTS §2).

A turn is one assistant reply plus the user message that answered it (a tool result or a
correction), so pruning never separates a call from its result. The rendered request is:

    [system, first user message (raw frame + query [+ warning]), *kept turns]

- kept turns: the latest turn that executed ``segment_phrase`` and every turn after it (before any
  segment ran: all turns), trimmed to ``max_messages`` by dropping the oldest turns after the
  segment turn; a turn renders as 2 messages (text protocol) or 2-3 (native protocol: assistant
  with the call, the tool message with its id, a user message with the overlay image);
- only the newest image among the kept turns survives (older overlays become a text note), so a
  request carries at most 2 images: the raw frame and the current overlay;
- once an executed prompt has been replaced, the first user message lists it as not to be reused.
"""

from __future__ import annotations

from dataclasses import dataclass

from sam3_agent_ros.core.types import ImagePart, Message

IMAGE_OMITTED = "[older overlay image omitted; the latest one below shows the current masks]"
IMAGE_FOLLOWS = "The image of the tool result above:"


@dataclass(frozen=True)
class Turn:
    assistant: Message  # the kept reply: answer text (no thinking) [+ the one native call]
    answer: Message  # user role: tool result or correction (text + images)
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


def render_turn(turn: Turn, keep_images: bool) -> list[Message]:
    """The messages of one turn. A native call (``assistant.tool_calls``) is answered by a
    ``tool`` message with its id; tool messages cannot carry images, so the answer's images
    follow in a user message."""
    answer = turn.answer if keep_images else _strip_images(turn.answer)
    if not turn.assistant.tool_calls:
        return [turn.assistant, answer]
    call_id = turn.assistant.tool_calls[0].id
    texts = tuple(p for p in answer.content if isinstance(p, str))
    messages = [turn.assistant, Message("tool", ("\n".join(texts),), tool_call_id=call_id)]
    if answer.images:
        messages.append(Message("user", (IMAGE_FOLLOWS, *answer.images)))
    return messages


def _render_turns(turns: list[Turn]) -> list[Message]:
    newest_with_image = max((i for i, t in enumerate(turns) if t.answer.images), default=-1)
    messages: list[Message] = []
    for index, turn in enumerate(turns):
        messages += render_turn(turn, keep_images=index == newest_with_image)
    return messages


def kept_turns(turns: list[Turn], max_messages: int) -> list[Turn]:
    """The turns that go into the next request: the latest turn that executed ``segment_phrase``
    and all after it, then, while over the bound, the oldest turn after the segment turn is
    dropped (the segment turn itself last). The newest turn is always kept."""
    start = 0
    for index in range(len(turns) - 1, -1, -1):
        if turns[index].executed_segment:
            start = index
            break
    tail = list(turns[start:])
    while len(tail) > 1 and 2 + len(_render_turns(tail)) > max_messages:
        del tail[1 if tail[0].executed_segment and len(tail) > 2 else 0]
    return tail


def _strip_images(message: Message) -> Message:
    content = tuple(IMAGE_OMITTED if isinstance(p, ImagePart) else p for p in message.content)
    return Message(message.role, content)


def build_messages(system: Message, first_user: Message, turns: list[Turn],
                   max_messages: int) -> list[Message]:
    """Render the next main-loop request from the whole history of turns."""
    return [system, first_user, *_render_turns(kept_turns(turns, max_messages))]


def check_messages(messages: list[Message], max_messages: int) -> str | None:
    """Return what is wrong with a request w.r.t. CONTRACTS §2, or None when it is valid.

    After messages[0:2] the request must be a sequence of turns: an assistant message answered
    by a user message, or (native protocol) an assistant message with one tool call answered by
    the tool message with its id, optionally followed by a user message with images."""
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
    index = 2
    while index < len(messages):
        assistant = messages[index]
        if assistant.role != "assistant" or assistant.images:
            return f"messages[{index}] has role {assistant.role}, expected assistant"
        if len(assistant.tool_calls) > 1:
            return f"messages[{index}] carries {len(assistant.tool_calls)} tool calls (one kept)"
        index += 1
        if index == len(messages):
            return "the last message must answer the assistant (user or tool)"
        answer = messages[index]
        if assistant.tool_calls:
            if answer.role != "tool" or answer.tool_call_id != assistant.tool_calls[0].id:
                return (f"messages[{index}] must be the tool message answering call "
                        f"{assistant.tool_calls[0].id!r}")
            if answer.images:
                return f"messages[{index}] is a tool message with images"
            if index + 1 < len(messages) and messages[index + 1].role == "user":
                index += 1
        elif answer.role != "user":
            return f"messages[{index}] has role {answer.role}, expected user"
        index += 1
    return None


def count_images(messages: list[Message]) -> int:
    return sum(len(m.images) for m in messages)

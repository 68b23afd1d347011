"""Pure context management: the main conversation is kept as turns and re-rendered, pruned, for
every request (interface §2).

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

A refinement (interface §8c) keeps this shape: its raw frame is the frame of the answer it
corrects, the first user message also states the earlier queries and what they selected (ids,
boxes: the mask table), and the earlier answer's overlay comes as a first turn before any call
(``earlier_answer_turn``), so it is pruned like any other turn once a ``segment_phrase`` runs and
never makes a third image.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from sam3_agent_ros.core.answers import AnswerRecord
from sam3_agent_ros.core.mask_table import format_table
from sam3_agent_ros.core.types import ImagePart, Message
from sam3_agent_ros.core.untrusted_text import clip

IMAGE_OMITTED = "[older overlay image omitted; the latest one below shows the current masks]"
IMAGE_FOLLOWS = "The image of the tool result above:"
EARLIER_HEADER = "The user is correcting earlier answers given on this same frame, oldest first:"
EARLIER_QUERY_CHARS = 300  # the most of an earlier query's text that a refinement repeats
EARLIER_LOOK = "Before I act, I look at the earlier answer the user is correcting."


@dataclass(frozen=True)
class Turn:
    assistant: Message  # the kept reply: answer text (no thinking) [+ the one native call]
    answer: Message  # user role: tool result or correction (text + images)
    executed_segment: bool = False


def first_user_message(frame_image: ImagePart, query: str, width: int, height: int,
                       replaced_prompts: list[str], earlier: Sequence[AnswerRecord] = (),
                       table_limit: int = 30) -> Message:
    """messages[1]: the raw frame and the query; in a refinement (``earlier``: the answers it
    corrects, oldest first) also what each of them selected; the prompts replaced so far."""
    which = "the frame of the earlier answers below" if earlier else "the current camera frame"
    text = (f"The image is {which} ({width}x{height} px; x grows to the right, "
            f"y grows downwards).\nUser query: {query}")
    if earlier:
        text += "\n\n" + earlier_answers_text(earlier, width, height, table_limit)
    if replaced_prompts:
        listed = ", ".join(f'"{p}"' for p in replaced_prompts)
        text += (f"\n\nNote: these text_prompts were already tried and their results replaced: "
                 f"{listed}. Do not use any of them again.")
    return Message("user", (frame_image, text))


def earlier_answers_text(earlier: Sequence[AnswerRecord], width: int, height: int,
                         table_limit: int) -> str:
    """What the answers a refinement corrects selected: per answer its query (JSON-quoted: one
    line whatever it holds), its masks as a mask table (ids as the user saw them, boxes), and its
    text_prompts; then how the model may use them. The earlier prompts are NOT counted as tried
    in the new query, and the model is told so."""
    lines = [EARLIER_HEADER]
    for number, record in enumerate(earlier, start=1):
        quoted = _quote(clip(record.query, EARLIER_QUERY_CHARS))
        named = f"Earlier answer {number}: query {quoted} (query_id {_quote(record.query_id)})"
        if record.selected:
            lines.append(f"{named} selected {len(record.selected)} mask(s):")
            lines.append(format_table(record.selected, width, height, table_limit))
        else:
            lines.append(f"{named} found no mask.")
        if record.text_prompts:
            lines.append("Its text_prompts: " + ", ".join(_quote(p)
                                                          for p in record.text_prompts) + ".")
    lines.append("The user query refers to these answers (\"the other one\", \"the one to its "
                 "left\": relative to the latest one). Their masks are not current masks of this "
                 "query: call segment_phrase to get masks you can select. The earlier "
                 "text_prompts were not tried in this query: you may use them again.")
    return "\n".join(lines)


def _quote(text: str) -> str:
    """``text`` as a JSON string: quoted, one line, its quotes and control characters escaped."""
    return json.dumps(text, ensure_ascii=False)


def earlier_answer_turn(record: AnswerRecord, overlay: ImagePart) -> Turn:
    """The first turn of a refinement: the earlier answer's overlay, as the user saw it (its
    masks numbered like ``~/labels``). Not a ``segment_phrase`` turn: the first one prunes it."""
    text = (f"The earlier answer to query {_quote(clip(record.query, EARLIER_QUERY_CHARS))} "
            f"(query_id {_quote(record.query_id)}) as the user saw it: its "
            f"{len(record.selected)} selected mask(s) drawn on the frame, numbered as in the "
            "table above. They are not current masks.")
    return Turn(Message.text("assistant", EARLIER_LOOK), Message("user", (text, overlay)))


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
    """Return what is wrong with a request w.r.t. interface §2, or None when it is valid.

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

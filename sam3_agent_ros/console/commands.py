"""What a page may ask of the node (pure): exactly what a client of the node's interface may do
(a goal, its cancel, a refinement, stop-follow, ``concepts.prompts``), never anything else, with
the node's own bounds. A page message is JSON text; ``parse_command`` returns a ``Command`` or
raises ``CommandRefused`` saying why.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

MAX_MESSAGE_CHARS = 16_384  # a page message; the node's own inputs are far smaller
MAX_QUERY_ID_CHARS = 256


@dataclass(frozen=True)
class Limits:
    """The node's bounds (its defaults until the node has told its own values)."""

    max_query_chars: int = 2000
    max_prompts: int = 8
    max_prompt_chars: int = 100


@dataclass(frozen=True)
class Command:
    kind: str  # ask | correct | cancel | stop_follow | concepts
    query: str = ""
    follow: bool = False
    refines: str = ""
    concepts: tuple[str, ...] = field(default_factory=tuple)


class CommandRefused(ValueError):
    """A page message the console does not pass on; the text says why."""


def parse_command(text: str, limits: Limits) -> Command:
    if len(text) > MAX_MESSAGE_CHARS:
        raise CommandRefused(f"message of {len(text)} characters (at most {MAX_MESSAGE_CHARS})")
    try:
        message = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise CommandRefused("not a JSON message") from exc
    if not isinstance(message, dict) or not isinstance(message.get("type"), str):
        raise CommandRefused('a message is a JSON object with a "type"')
    kind = message["type"]
    if kind == "ask":
        return Command("ask", query=_query(message, limits), follow=message.get("follow") is True)
    if kind == "correct":
        refines = message.get("refines")
        if not isinstance(refines, str) or not refines.strip():
            raise CommandRefused("no answer to correct yet: ask first")
        if len(refines) > MAX_QUERY_ID_CHARS:
            raise CommandRefused(f"refines: at most {MAX_QUERY_ID_CHARS} characters")
        return Command("correct", query=_query(message, limits), refines=refines)
    if kind in ("cancel", "stop_follow"):
        return Command(kind)
    if kind == "concepts":
        return Command("concepts", concepts=concept_list(message.get("text"), limits))
    raise CommandRefused(f"unknown request {kind[:40]!r}: ask, correct, cancel, stop_follow or "
                         "concepts")


def _query(message: dict, limits: Limits) -> str:
    query = message.get("query")
    if not isinstance(query, str) or not query.strip():
        raise CommandRefused("the query is empty: type what to find")
    query = query.strip()
    if len(query) > limits.max_query_chars:
        raise CommandRefused(f"the query has {len(query)} characters, more than the node's "
                             f"max_query_chars ({limits.max_query_chars})")
    return query


def concept_list(text: object, limits: Limits) -> tuple[str, ...]:
    """``"cup, red ball"`` -> ``("cup", "red ball")``; empty text -> ``()`` (concepts off)."""
    if not isinstance(text, str):
        raise CommandRefused("concepts: a comma-separated text")
    concepts = tuple(part.strip() for part in text.split(",") if part.strip())
    if len(concepts) > limits.max_prompts:
        raise CommandRefused(f"{len(concepts)} concepts, more than the node's "
                             f"concepts.max_prompts ({limits.max_prompts})")
    for concept in concepts:
        if len(concept) > limits.max_prompt_chars:
            raise CommandRefused(f"a concept of {len(concept)} characters, more than the node's "
                                 f"concepts.max_prompt_chars ({limits.max_prompt_chars})")
    return concepts

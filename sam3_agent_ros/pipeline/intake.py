"""The intake of a query, topic and action alike: one validator, one rejection type.

The ``query`` topic: plain text, or a JSON object ``{"id": str, "query": str}``
with an optional ``"follow": bool`` (keep the answer current on new frames, interface §5b) and an
optional ``"refines": str`` (the query_id of an earlier answer this query corrects, §8c), or
``{"stop_follow": true}`` (end following; an ``"id"`` may name the message).

An action goal (``goal_query``): its text, ``query_id`` and ``refines`` fields, bounded alike.

Pure: no ROS. Anything unusable raises ``QueryRejected`` with a reason and what it could read
of the query (``failed_query``); the node answers that ``failed`` (every query gets exactly one
result, even a malformed one).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sam3_agent_ros.core import guarded_json
from sam3_agent_ros.core.types import Query
from sam3_agent_ros.core.untrusted_text import clip, echoable

MAX_QUERY_ID_CHARS = 128  # ids name queries in results, logs and goals: short labels
ECHO_CHARS = 200  # how much of a rejected message its failed result repeats
QUERY_EXAMPLE = '{"id": "q-1", "query": "the red cup"}'


class QueryRejected(ValueError):
    """The message or goal is not a usable query. ``query_id`` is the (usable) id it gave, if
    any; ``text`` at most ``ECHO_CHARS`` of its text; ``refines`` the answer it corrects."""

    def __init__(self, reason: str, query_id: str | None = None, text: str = "",
                 refines: str | None = None):
        super().__init__(reason)
        self.reason = reason
        self.query_id = query_id
        self.text = text
        self.refines = refines

    def failed_query(self, new_query_id: Callable[[], str]) -> Query:
        """The query its ``failed`` result answers (a node-made id where it gave none)."""
        return Query(self.query_id or new_query_id(), self.text, self.refines)


@dataclass(frozen=True)
class ParsedQuery:
    query_id: str | None  # None: the node assigns one
    text: str
    follow: bool | None = None  # None: not said (the node applies follow.default)
    refines: str | None = None  # the query_id of the answer it corrects; None: not a refinement


@dataclass(frozen=True)
class StopFollow:
    """``{"stop_follow": true}``: end following (not a query: it has no result)."""

    query_id: str | None = None


def parse_query_message(raw: str, max_chars: int) -> ParsedQuery | StopFollow:
    """Parse one ``std_msgs/String`` query; raise ``QueryRejected`` for empty, oversized or
    malformed input. A message whose first non-blank character is ``{`` must be JSON."""
    if len(raw) > max_chars:
        raise QueryRejected(
            f"query is {len(raw)} characters long, more than max_query_chars={max_chars}",
            text=raw[:ECHO_CHARS])
    stripped = raw.strip()
    if not stripped.startswith("{"):
        if not stripped:
            raise QueryRejected("empty query")
        return ParsedQuery(None, stripped)
    try:  # depth and number length bounded: any text gets its one result (guarded_json)
        payload = guarded_json.loads(stripped)
    except guarded_json.JsonRefused as exc:
        raise QueryRejected(f"invalid JSON query: {exc}", text=stripped[:ECHO_CHARS]) from None
    if not isinstance(payload, dict):
        raise QueryRejected("invalid JSON query: expected an object", text=stripped)
    query_id = _id_field(payload, "id", None, stripped)
    if "stop_follow" in payload:
        return _stop_follow(payload, query_id, stripped)
    follow = payload.get("follow")
    if follow is not None and not isinstance(follow, bool):
        raise QueryRejected("invalid JSON query: 'follow' must be true or false, got "
                            f"{clip(repr(follow), 60)}", query_id, text=stripped)
    if "query" not in payload:
        raise QueryRejected(f'invalid JSON query: it needs a "query" field with the text, e.g. '
                            f"{QUERY_EXAMPLE}", query_id, text=stripped)
    text = payload.get("query")
    if not isinstance(text, str):
        raise QueryRejected("invalid JSON query: 'query' must be a string", query_id,
                            text=stripped)
    text = echoable(text)  # a lone surrogate ("\\ud800") could be neither logged nor published
    if not text.strip():
        raise QueryRejected("empty query", query_id)
    refines = _id_field(payload, "refines", query_id, stripped)
    return ParsedQuery(query_id, text.strip(), follow, refines)


def _id_field(payload: dict[str, Any], name: str, query_id: str | None, raw: str) -> str | None:
    """An id field (``id``, ``refines``): a string (a number is taken as one), at most
    ``MAX_QUERY_ID_CHARS`` long once its lone surrogates are escaped (``echoable``: the id is
    logged, published and echoed); missing or empty: None."""
    value = payload.get(name)
    if isinstance(value, bool) or not isinstance(value, (str, int, type(None))):
        raise QueryRejected(f"invalid JSON query: '{name}' must be a string, got "
                            f"{clip(repr(value), 60)}", query_id, text=raw[:ECHO_CHARS])
    value = None if value is None or value == "" else echoable(str(value))
    if value is not None and len(value) > MAX_QUERY_ID_CHARS:
        raise QueryRejected(f"invalid JSON query: '{name}' is {len(value)} characters long, "
                            f"more than {MAX_QUERY_ID_CHARS}", query_id, text=raw[:ECHO_CHARS])
    return value


def _stop_follow(payload: dict[str, Any], query_id: str | None, raw: str) -> StopFollow:
    if payload["stop_follow"] is not True:
        raise QueryRejected("invalid JSON query: 'stop_follow' must be true, got "
                            f"{clip(repr(payload['stop_follow']), 60)}", query_id, text=raw)
    if "query" in payload or "follow" in payload or "refines" in payload:
        raise QueryRejected("invalid JSON query: a 'stop_follow' message cannot also carry "
                            "'query', 'follow' or 'refines'", query_id, text=raw)
    return StopFollow(query_id)


def goal_query(text: str, query_id: str, max_chars: int, new_query_id: Callable[[], str],
               refines: str = "") -> Query:
    """The query of a goal: ids as for topic queries (generated when empty); ``refines`` (the
    query_id of the answer it corrects; empty: none) bounded like an id. Raises
    ``QueryRejected`` for an empty or oversized query, id or refines. Lengths are checked first:
    a rejected query carries at most ``ECHO_CHARS`` of its text, no id in place of an oversized
    one (``failed_query`` makes one), so nothing long is logged or echoed."""
    query_id = query_id.strip()
    if len(query_id) > MAX_QUERY_ID_CHARS:
        raise QueryRejected(f"query_id is {len(query_id)} characters long, more than "
                            f"{MAX_QUERY_ID_CHARS}", None, clip(text, ECHO_CHARS))
    query_id = query_id or new_query_id()
    refines = refines.strip()
    if len(refines) > MAX_QUERY_ID_CHARS:
        raise QueryRejected(f"refines is {len(refines)} characters long, more than "
                            f"{MAX_QUERY_ID_CHARS}", query_id, clip(text, ECHO_CHARS))
    if len(text) > max_chars:
        raise QueryRejected(f"query is {len(text)} characters long, more than "
                            f"max_query_chars={max_chars}", query_id, clip(text, ECHO_CHARS),
                            refines or None)
    query = Query(query_id, text.strip(), refines or None)
    if not query.text:
        raise QueryRejected("empty query", query_id, query.text, query.refines)
    return query

"""Parsing the query topic's text: plain text or {"id", "query"} JSON; bad input -> a reason."""

from __future__ import annotations

import pytest

from sam3_agent_ros.ros.query_message import (
    ParsedQuery,
    QueryRejected,
    StopFollow,
    parse_query_message,
)


@pytest.mark.parametrize("raw,expected", [
    ("the leftmost blue object", ParsedQuery(None, "the leftmost blue object")),
    ("  padded \n", ParsedQuery(None, "padded")),
    ('{"id": "q-17", "query": "the red cup"}', ParsedQuery("q-17", "the red cup")),
    ('{"query": "no id"}', ParsedQuery(None, "no id")),
    ('{"id": "", "query": "empty id"}', ParsedQuery(None, "empty id")),
    ('{"id": 42, "query": "numeric id"}', ParsedQuery("42", "numeric id")),
    ('[1, 2] is not an object but plain text', ParsedQuery(None, "[1, 2] is not an object but "
                                                           "plain text")),
])
def test_valid_queries(raw, expected):
    assert parse_query_message(raw, 2000) == expected


@pytest.mark.parametrize("raw,reason,query_id", [
    ("", "empty query", None),
    (" \t\n", "empty query", None),
    ("{oops", "invalid JSON query: Expecting property name enclosed in double quotes at "
              "character 1", None),
    ('{"id": "a"', "invalid JSON query", None),
    ('{"id": "a", "query": 3}', "invalid JSON query: 'query' must be a string", "a"),
    ('{"id": "a"}', "invalid JSON query: 'query' must be a string", "a"),
    ('{"id": "a", "query": "  "}', "empty query", "a"),
    ('{"id": true, "query": "x"}', "invalid JSON query: 'id' must be a string, got True", None),
    ('{"id": ["a"], "query": "x"}', "'id' must be a string", None),
])
def test_rejected_queries_say_why(raw, reason, query_id):
    with pytest.raises(QueryRejected) as caught:
        parse_query_message(raw, 2000)
    assert reason in caught.value.reason
    assert caught.value.query_id == query_id


def test_oversized_query_is_rejected_before_parsing():
    with pytest.raises(QueryRejected, match="3001 characters long, more than max_query_chars=3000"):
        parse_query_message("{" + "x" * 3000, 3000)
    assert parse_query_message("x" * 3000, 3000).text == "x" * 3000


@pytest.mark.parametrize("raw,expected", [
    ('{"id": "f", "query": "the red cup", "follow": true}', ParsedQuery("f", "the red cup", True)),
    ('{"query": "the red cup", "follow": false}', ParsedQuery(None, "the red cup", False)),
    ('{"stop_follow": true}', StopFollow(None)),
    ('{"id": "s-1", "stop_follow": true}', StopFollow("s-1")),
])
def test_follow_and_stop_follow(raw, expected):
    assert parse_query_message(raw, 2000) == expected


@pytest.mark.parametrize("raw,reason", [
    ('{"query": "x", "follow": "yes"}', "'follow' must be true or false, got 'yes'"),
    ('{"query": "x", "follow": 1}', "'follow' must be true or false, got 1"),
    ('{"stop_follow": false}', "'stop_follow' must be true, got False"),
    ('{"stop_follow": true, "query": "x"}', "cannot also carry 'query' or 'follow'"),
])
def test_bad_follow_fields_are_rejected(raw, reason):
    with pytest.raises(QueryRejected) as caught:
        parse_query_message(raw, 2000)
    assert reason in caught.value.reason

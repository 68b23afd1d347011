"""pipeline/intake.py: the query topic's text (plain text or {"id", "query"} JSON) and action
goals; bad input -> a reason and the query its failed result answers."""

from __future__ import annotations

import itertools

import pytest

from sam3_agent_ros.core.types import Query
from sam3_agent_ros.pipeline.intake import (
    ECHO_CHARS,
    MAX_QUERY_ID_CHARS,
    ParsedQuery,
    QueryRejected,
    StopFollow,
    goal_query,
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
              "position 1", None),
    ('{"id": "a"', "invalid JSON query", None),
    ('{"id": "a", "query": 3}', "invalid JSON query: 'query' must be a string", "a"),
    ('{"id": "a"}', 'it needs a "query" field with the text, e.g. {"id": "q-1", "query": '
                    '"the red cup"}', "a"),
    ('{"id": "a", "text": "the red cup"}', 'it needs a "query" field', "a"),
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
    ('{"stop_follow": true, "query": "x"}', "cannot also carry 'query', 'follow' or 'refines'"),
    ('{"stop_follow": true, "refines": "q-1"}', "cannot also carry"),
])
def test_bad_follow_fields_are_rejected(raw, reason):
    with pytest.raises(QueryRejected) as caught:
        parse_query_message(raw, 2000)
    assert reason in caught.value.reason


# --- attacks: every text gets its one result, with a clear reason and a bounded echo -----------

@pytest.mark.parametrize("raw,reason", [
    ('{"query": ' + "[" * 1500, "nested more than 32 levels deep"),  # RecursionError in json
    ('{"query": "x", "id": ' + "9" * 5000 + "}", "a number of 5000 digits"),  # ValueError
    ('{"query": ' + "[" * 20 + "]" * 20 + "}", "'query' must be a string"),  # shallow: fine
], ids=["deep-nesting", "5000-digit-int", "shallow-nesting"])
def test_pathological_json_is_rejected_with_a_reason_not_an_exception(raw, reason):
    with pytest.raises(QueryRejected) as caught:
        parse_query_message(raw, 10_000)
    assert reason in caught.value.reason
    assert len(caught.value.text) <= ECHO_CHARS


def test_a_long_id_is_rejected_and_not_kept():
    long_id = "i" * (MAX_QUERY_ID_CHARS + 1)
    with pytest.raises(QueryRejected) as caught:
        parse_query_message(f'{{"id": "{long_id}", "query": "the red cup"}}', 2000)
    assert f"'id' is {MAX_QUERY_ID_CHARS + 1} characters long" in caught.value.reason
    assert caught.value.query_id is None  # the node names the failed result itself
    at_limit = "i" * MAX_QUERY_ID_CHARS
    parsed = parse_query_message(f'{{"id": "{at_limit}", "query": "the red cup"}}', 2000)
    assert parsed.query_id == at_limit


def test_bad_values_are_quoted_clipped_in_the_reason():
    with pytest.raises(QueryRejected) as caught:
        parse_query_message('{"query": "x", "follow": "' + "y" * 1500 + '"}', 2000)
    assert "'follow' must be true or false" in caught.value.reason
    assert len(caught.value.reason) < 200


@pytest.mark.parametrize("raw,expected", [
    ('{"id": "q-2", "query": "no, the other one", "refines": "q-1"}',
     ParsedQuery("q-2", "no, the other one", None, "q-1")),
    ('{"query": "the other one", "refines": 17}', ParsedQuery(None, "the other one", None, "17")),
    ('{"query": "the cup", "refines": ""}', ParsedQuery(None, "the cup")),
    ('{"query": "the cup", "refines": null, "follow": true}', ParsedQuery(None, "the cup", True)),
])
def test_refines_names_the_answer_a_query_corrects(raw, expected):
    assert parse_query_message(raw, 2000) == expected


@pytest.mark.parametrize("refines, reason", [
    ("true", "'refines' must be a string, got True"),
    ('["q-1"]', "'refines' must be a string"),
    ('"' + "r" * (MAX_QUERY_ID_CHARS + 1) + '"',
     f"'refines' is {MAX_QUERY_ID_CHARS + 1} characters long, more than {MAX_QUERY_ID_CHARS}"),
])
def test_a_bad_refines_is_rejected_with_its_query_id_and_a_bounded_echo(refines, reason):
    raw = '{"id": "q-2", "query": "the other one", "refines": ' + refines + "}"
    with pytest.raises(QueryRejected) as caught:
        parse_query_message(raw, 2000)
    assert reason in caught.value.reason and caught.value.query_id == "q-2"
    assert len(caught.value.text) <= ECHO_CHARS


@pytest.mark.parametrize("raw,expected", [
    ('{"id": "\\ud800", "query": "x"}', ParsedQuery("\\ud800", "x")),
    ('{"id": "a\\udfffb", "query": "x"}', ParsedQuery("a\\udfffb", "x")),
    ('{"id": "q-3", "refines": "\\ud800", "query": "x"}', ParsedQuery("q-3", "x", None, "\\ud800")),
    ('{"id": "q-4", "query": "cup \\ud800"}', ParsedQuery("q-4", "cup \\ud800")),
    ('{"id": "\\ud800", "stop_follow": true}', StopFollow("\\ud800")),
])
def test_a_lone_surrogate_is_escaped_so_the_query_can_be_logged_and_answered(raw, expected):
    parsed = parse_query_message(raw, 2000)
    assert parsed == expected
    for value in vars(parsed).values():  # every field can go out as UTF-8 (a String, a log)
        if isinstance(value, str):
            value.encode("utf-8")


def test_a_rejected_query_carries_its_id_escaped():
    with pytest.raises(QueryRejected) as caught:
        parse_query_message('{"id": "\\ud800", "follow": 3, "query": "x"}', 2000)
    assert caught.value.query_id == "\\ud800"
    caught.value.query_id.encode("utf-8")


def test_an_id_too_long_once_escaped_is_rejected():
    raw = '{"id": "' + "\\ud800" * (MAX_QUERY_ID_CHARS // 6 + 1) + '", "query": "x"}'
    with pytest.raises(QueryRejected) as caught:
        parse_query_message(raw, 10_000)
    assert "'id' is" in caught.value.reason and caught.value.query_id is None


def test_a_control_character_id_is_kept_as_sent():
    # JSON escapes it in the result and for_log in the log: it can be echoed as it is.
    assert parse_query_message('{"id": "a\\nb", "query": "x"}', 2000).query_id == "a\nb"


# --- action goals ------------------------------------------------------------------------------
def ids():
    counter = itertools.count(1)
    return lambda: f"q-{next(counter)}"


def test_goal_query_keeps_or_makes_the_id_and_strips_the_text():
    new_id = ids()
    assert goal_query("  the cup ", "", 100, new_id) == Query("q-1", "the cup")
    assert goal_query("the cup", " mine ", 100, new_id) == Query("mine", "the cup")


@pytest.mark.parametrize("text, reason", [
    ("", "empty query"), ("   ", "empty query"),
    ("x" * 11, "query is 11 characters long, more than max_query_chars=10")])
def test_goal_query_rejects_with_the_reason_and_the_query(text, reason):
    with pytest.raises(QueryRejected) as caught:
        goal_query(text, "g-1", 10, ids())
    assert caught.value.reason == reason
    assert caught.value.failed_query(ids()).id == "g-1"


def test_a_megabyte_goal_is_rejected_carrying_only_a_clipped_text():
    """Nothing long is logged or echoed: the rejected query (logged, then published as the failed
    result) holds at most ECHO_CHARS of the text."""
    with pytest.raises(QueryRejected) as caught:
        goal_query("blue " * 200_000, "g-1", 2000, ids())
    reason, query = caught.value.reason, caught.value.failed_query(ids())
    assert reason == "query is 1000000 characters long, more than max_query_chars=2000"
    assert query.id == "g-1" and len(query.text) <= ECHO_CHARS
    assert query.text.endswith("... (1000000 characters)")


def test_a_long_goal_id_is_replaced_by_a_node_made_one():
    long_id, new_id = "i" * (MAX_QUERY_ID_CHARS + 1), ids()
    with pytest.raises(QueryRejected) as caught:
        goal_query("the cup", long_id, 100, new_id)
    reason, query = caught.value.reason, caught.value.failed_query(new_id)
    assert reason == f"query_id is {MAX_QUERY_ID_CHARS + 1} characters long, more than 128"
    assert query == Query("q-1", "the cup")
    assert goal_query("the cup", "i" * MAX_QUERY_ID_CHARS, 100, ids()).id == (
        "i" * MAX_QUERY_ID_CHARS)


def test_a_goal_may_refine_an_earlier_answer_named_by_a_bounded_id():
    new_id = ids()
    assert goal_query("no, the other one", "q-2", 100, new_id, " q-1 ") == Query(
        "q-2", "no, the other one", refines="q-1")
    assert goal_query("the cup", "q-3", 100, new_id, "").refines is None
    with pytest.raises(QueryRejected) as caught:
        goal_query("the other one", "q-4", 100, new_id, "r" * (MAX_QUERY_ID_CHARS + 1))
    reason, query = caught.value.reason, caught.value.failed_query(new_id)
    assert reason == f"refines is {MAX_QUERY_ID_CHARS + 1} characters long, more than 128"
    assert query == Query("q-4", "the other one")  # the oversized id is not carried on
    with pytest.raises(QueryRejected) as caught:
        goal_query("  ", "q-5", 100, new_id, "q-1")
    assert caught.value.failed_query(new_id).refines == "q-1"  # its failed result names it

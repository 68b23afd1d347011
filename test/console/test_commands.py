"""console/commands.py: a page may only ask what a client of the node may, bounded like the
node's own inputs."""

from __future__ import annotations

import json

import pytest

from sam3_agent_ros.console.commands import (
    MAX_MESSAGE_CHARS,
    Command,
    CommandRefused,
    Limits,
    parse_command,
)

LIMITS = Limits(max_query_chars=20, max_prompts=2, max_prompt_chars=10)


def parse(**message):
    return parse_command(json.dumps(message), LIMITS)


def test_the_requests_a_page_may_make():
    assert parse(type="ask", query=" the cup ", follow=True) == Command("ask", "the cup", True)
    assert parse(type="ask", query="the cup", follow="yes").follow is False
    assert parse(type="correct", query="the other one", refines="q-1") == Command(
        "correct", "the other one", refines="q-1")
    assert parse(type="cancel") == Command("cancel")
    assert parse(type="stop_follow") == Command("stop_follow")
    assert parse(type="concepts", text="cup, red ball ,").concepts == ("cup", "red ball")
    assert parse(type="concepts", text=" ").concepts == ()


@pytest.mark.parametrize("message, says", [
    ({"type": "ask", "query": ""}, "empty"),
    ({"type": "ask", "query": "x" * 21}, "max_query_chars (20)"),
    ({"type": "ask", "query": ["a"]}, "empty"),
    ({"type": "correct", "query": "the other one"}, "ask first"),
    ({"type": "correct", "query": "the other one", "refines": "x" * 300}, "256"),
    ({"type": "concepts", "text": "a, b, c"}, "concepts.max_prompts (2)"),
    ({"type": "concepts", "text": "a very long concept"}, "concepts.max_prompt_chars (10)"),
    ({"type": "concepts", "text": ["a"]}, "comma-separated"),
    # anything else of the node (other parameters, lifecycle) is not a page's to ask
    ({"type": "set_parameter", "name": "llm.base_url", "value": "http://x"}, "unknown request"),
    ({"type": "lifecycle", "transition": "shutdown"}, "unknown request"),
    ({"query": "no type"}, '"type"'),
])
def test_refused_requests_say_why(message, says):
    with pytest.raises(CommandRefused, match=None) as refused:
        parse_command(json.dumps(message), LIMITS)
    assert says in str(refused.value)


def test_oversized_and_malformed_messages_are_refused():
    with pytest.raises(CommandRefused, match="at most"):
        parse_command(" " * (MAX_MESSAGE_CHARS + 1), LIMITS)
    with pytest.raises(CommandRefused, match="not a JSON"):
        parse_command("{", LIMITS)
    with pytest.raises(CommandRefused, match="not a JSON"):
        parse_command("[" * 5000, LIMITS)
    with pytest.raises(CommandRefused):
        parse_command("[]", LIMITS)

"""The reply-shape corpus (test/fakes/reply_shapes.py) over real HTTP, in both protocols: what
was executed, what the model was told, and that thinking never reaches a later request."""

from __future__ import annotations

import json

import numpy as np
import pytest

from sam3_agent_ros.config import Config
from sam3_agent_ros.core.agent import Agent
from sam3_agent_ros.core.types import Frame, Query, QueryStatus
from sam3_agent_ros.llm.openai_client import OpenAiClient
from test.fakes import reply_shapes
from test.fakes.reply_shapes import PROMPT, QUERY, THOUGHT, Shape
from test.fakes.scripted_server import (
    ScriptedServer,
    count_images,
    message_parts,
    message_text,
    native_call,
    tool_call,
    verdict,
)
from test.fakes.segmenters import BoxSegmenter

W, H = 640, 480
BOXES = {PROMPT: [(100, 200, 160, 260, 0.9), (400, 220, 470, 290, 0.8)],
         "cube": [(100, 200, 160, 260, 0.95)], "box": [(100, 200, 160, 260, 0.95)]}


def run_query(server: ScriptedServer, protocol: str, **agent_params):
    params = {"llm.backend": "openai", "llm.base_url": server.base_url, "llm.timeout_s": 10.0,
              "llm.max_retries": 0, "llm.protocol": protocol, "agent.max_image_side": 320,
              "agent.status_reasoning_chars": 400}
    params.update({f"agent.{k}": v for k, v in agent_params.items()})
    config = Config.from_params(params)
    segmenter = BoxSegmenter(BOXES)
    agent = Agent(config, llm=OpenAiClient(config.llm, config.agent.max_image_side),
                  segmenter=segmenter)
    events = []
    image = np.random.default_rng(3).integers(0, 255, (H, W, 3), dtype=np.uint8)
    result = agent.run(Frame(image, 1, 2, "camera"), Query("q", QUERY), on_status=events.append)
    return result, segmenter, events


def check_request(body: dict, protocol: str, max_messages: int = 10) -> None:
    """interface §2 on a raw request body, both protocols: bounds, the first two messages, and
    every native call answered by the tool message with its id right after it."""
    messages = body["messages"]
    assert messages[0]["role"] == "system"
    assert messages[1]["role"] == "user" and count_images({"messages": messages[1:2]}) == 1
    assert len(messages) <= max_messages and count_images(body) <= 2
    assert (("tools" in body) == (protocol == "tools"))
    for index, message in enumerate(messages):
        if message["role"] == "tool":
            previous = messages[index - 1]
            assert previous["role"] == "assistant" and previous.get("tool_calls"), index
            assert message["tool_call_id"] == previous["tool_calls"][0]["id"]
            assert isinstance(message["content"], str)
        for call in message.get("tool_calls") or []:
            assert len(message["tool_calls"]) == 1
            answer = messages[index + 1]
            assert answer["role"] == "tool" and answer["tool_call_id"] == call["id"]
    assert messages[-1]["role"] in ("user", "tool")


CASES = [(protocol, shape) for protocol in ("text", "tools")
         for shape in reply_shapes.shapes_for(protocol)]


@pytest.mark.parametrize("protocol, shape", CASES,
                         ids=[f"{p}: {s.name}" for p, s in CASES])
def test_reply_shape(protocol: str, shape: Shape):
    with ScriptedServer(reply_shapes.script_for(shape, protocol)) as server:
        result, segmenter, events = run_query(server, protocol)
    server.assert_clean()
    assert result.status is QueryStatus.SUCCEEDED, result.error
    # What was executed: the right prompt, never a decoy from the thinking.
    assert segmenter.calls == [PROMPT]
    assert result.text_prompts == [PROMPT]
    bodies = [r.body for r in server.main_requests]
    for body in bodies:
        check_request(body, protocol)
    # Thinking is never kept: no later request carries it.
    for body in bodies[1:]:
        assert THOUGHT not in json.dumps(body)
    answer_to_first = _answer_to_first_reply(bodies[1])
    if shape.outcome == "executes":
        assert result.rounds == 2
        assert f'segment_phrase("{PROMPT}") found 2 mask(s)' in answer_to_first
        if shape.told:
            assert shape.told in answer_to_first
    else:
        assert result.rounds == 3
        assert answer_to_first.startswith("Error:"), answer_to_first
        assert shape.hint in answer_to_first
        # The correction is the only detour: the third request starts from the segment turn.
        assert "Error:" not in json.dumps(bodies[2]["messages"][2:])


def _answer_to_first_reply(body: dict) -> str:
    """The text of the tool result or correction that answered the first reply."""
    after = body["messages"][3:]
    return "\n".join(message_text(m) for m in after if m["role"] in ("user", "tool"))


@pytest.mark.parametrize("protocol", ["text", "tools"])
def test_status_events_carry_the_rounds_reasoning_clipped(protocol):
    long_reasoning = "Blue things are on the left side of the table. " * 30 + "So: blue object."
    good = reply_shapes.good_replies(protocol)
    first = native_call("segment_phrase", reasoning=long_reasoning, text_prompt=PROMPT) \
        if protocol == "tools" else tool_call("segment_phrase", long_reasoning, text_prompt=PROMPT)
    with ScriptedServer([first, good["select"]]) as server:
        result, _, events = run_query(server, protocol)
    assert result.status is QueryStatus.SUCCEEDED
    segmenting = [e for e in events if e.phase.value == "segmenting"]
    assert len(segmenting) == 1
    reasoning = segmenting[0].reasoning
    assert reasoning.endswith("So: blue object.") and len(reasoning) <= 400
    assert segmenting[0].to_json()["reasoning"] == reasoning
    assert all(e.reasoning is None for e in events if e.phase.value == "thinking")


def test_reasoning_field_is_the_status_reasoning_when_the_answer_has_none():
    call = json.dumps({"name": "segment_phrase", "parameters": {"text_prompt": PROMPT}})
    reply = reply_shapes.text_reply(f"<tool>{call}</tool>",
                                    reasoning_content="I look at the left side first.")
    with ScriptedServer([reply, reply_shapes.good_replies("text")["select"]]) as server:
        _, _, events = run_query(server, "text")
    assert [e.reasoning for e in events if e.phase.value == "segmenting"] == [
        "I look at the left side first."]


def test_status_reasoning_off_with_zero_chars():
    good = reply_shapes.good_replies("text")
    with ScriptedServer([good["segment"], good["select"]]) as server:
        _, _, events = run_query(server, "text", status_reasoning_chars=0)
    assert all(e.reasoning is None for e in events)


@pytest.mark.parametrize("protocol", ["text", "tools"])
def test_every_corrective_shape_in_a_row_fails_after_max_consecutive_mistakes(protocol):
    bad = [s.reply for s in reply_shapes.shapes_for(protocol) if s.outcome == "corrects"][:3]
    with ScriptedServer(bad) as server:
        result, segmenter, _ = run_query(server, protocol, max_consecutive_mistakes=3)
    server.assert_clean()
    assert result.status is QueryStatus.FAILED and "3 invalid model replies" in result.error
    assert segmenter.calls == []


def test_tools_protocol_long_query_segment_duplicate_examine_select():
    """interface §1b: every executed or refused call is answered by its tool_call_id; the
    overlay follows in a user message; §2 holds in every request."""
    script = [native_call("segment_phrase", call_id="c1", text_prompt=PROMPT),
              native_call("segment_phrase", call_id="c2", text_prompt="Blue Object"),  # repeat
              native_call("examine_each_mask", call_id="c3"),
              native_call("segment_phrase", call_id="c4", text_prompt="cube"),
              native_call("select_masks_and_return", call_id="c5", final_answer_masks=[1])]
    with ScriptedServer(script, verifier=lambda body: verdict(True)) as server:
        result, segmenter, _ = run_query(server, "tools")
    server.assert_clean()
    assert result.status is QueryStatus.SUCCEEDED and len(result.masks) == 1
    assert segmenter.calls == [PROMPT, "cube"]  # the duplicate was refused, not run
    bodies = [r.body for r in server.main_requests]
    for body in bodies:
        check_request(body, "tools")
    # The refusal answered call c2 by its id.
    refused = next(m for m in bodies[2]["messages"] if m.get("tool_call_id") == "c2")
    assert "was NOT run" in refused["content"]
    # After the second segment_phrase, pruning starts at its call: c1..c3 are gone, the first
    # message lists the replaced prompt, and the overlay is a user message after tool c4.
    last = bodies[-1]["messages"]
    ids = [m.get("tool_call_id") for m in last if m["role"] == "tool"]
    assert ids == ["c4"]
    assert f'"{PROMPT}"' in message_text(last[1])
    assert last[-1]["role"] == "user" and any(
        p.get("type") == "image_url" for p in message_parts(last[-1]))
    for request in server.verifier_requests:
        assert "tools" not in request.body and len(request.messages) == 2


def test_tools_protocol_needs_room_for_three_message_turns():
    from sam3_agent_ros.config import ConfigError

    with pytest.raises(ConfigError, match="at least 5"):
        Config.from_params({"llm.protocol": "tools", "agent.max_context_messages": 4})
    Config.from_params({"llm.protocol": "text", "agent.max_context_messages": 4})

"""End to end over real HTTP: Agent + OpenAiClient (real openai SDK) + a scripted
OpenAI-compatible server on 127.0.0.1 that checks interface §2 on every request it receives."""

from __future__ import annotations

import json

import numpy as np
import pytest

from sam3_agent_ros.config import Config
from sam3_agent_ros.core.agent import Agent
from sam3_agent_ros.core.types import Frame, Query, QueryStatus
from sam3_agent_ros.llm.openai_client import OpenAiClient
from test.fakes.scripted_server import (
    ScriptedServer,
    SilentServer,
    count_images,
    drop_connection,
    http_error,
    message_text,
    raw_body,
    tool_call,
    verdict,
)
from test.fakes.secret_url import attack_url, closed_port, leaks, redacted_url
from test.fakes.segmenters import BoxSegmenter

W, H = 1280, 720
BOXES = {
    "cup": [(900, 200, 1000, 300, 0.7), (100, 250, 200, 380, 0.9), (500, 150, 600, 260, 0.8)],
    "mug": [(100, 250, 200, 380, 0.95)],
    "bowl": [(400, 500, 700, 650, 0.6), (800, 520, 950, 640, 0.5)],
    "cups": [(900, 200, 1000, 300, 0.7), (100, 250, 200, 380, 0.9)],
}


def agent_for(server: ScriptedServer, segmenter=None, **agent_params) -> Agent:
    params = {"llm.backend": "openai", "llm.base_url": server.base_url, "llm.timeout_s": 5.0,
              "llm.max_retries": 2, "agent.max_image_side": 640}
    params.update({f"agent.{k}": v for k, v in agent_params.items()})
    config = Config.from_params(params)
    llm = OpenAiClient(config.llm, config.agent.max_image_side, backoff_base_s=0.01)
    return Agent(config, llm=llm, segmenter=segmenter or BoxSegmenter(BOXES))


def frame() -> Frame:
    rng = np.random.default_rng(1)
    return Frame(rng.integers(0, 255, (H, W, 3), dtype=np.uint8), 5, 6, "camera")


def check_main_request(body: dict, max_messages: int = 10) -> None:
    messages = body["messages"]
    assert messages[0]["role"] == "system" and count_images({"messages": messages[:1]}) == 0
    assert messages[1]["role"] == "user" and count_images({"messages": messages[1:2]}) == 1
    assert "User query:" in message_text(messages[1])
    assert len(messages) <= max_messages
    assert count_images(body) <= 2


def reject_second(request: dict):
    text = message_text(request["messages"][1])
    return verdict("mask 2" not in text and True)


def test_long_conversation_over_http_stays_bounded_flat_and_isolated():
    script = [tool_call("segment_phrase", text_prompt="cup"), tool_call("examine_each_mask"),
              tool_call("segment_phrase", text_prompt="cup"), "no tool call here",
              tool_call("segment_phrase", text_prompt="mug"), tool_call("examine_each_mask"),
              tool_call("segment_phrase", text_prompt="bowl"), tool_call("examine_each_mask"),
              tool_call("examine_each_mask"), tool_call("segment_phrase", text_prompt="mug"),
              tool_call("segment_phrase", text_prompt="cups"), tool_call("examine_each_mask"),
              tool_call("select_masks_and_return", final_answer_masks=[7]),
              tool_call("select_masks_and_return", final_answer_masks=[1])]
    calls = {"n": 0}

    def alternate(request):
        calls["n"] += 1
        return verdict(calls["n"] % 3 != 2)

    with ScriptedServer(script, verifier=alternate) as server:
        result = agent_for(server).run(frame(), Query("long", "the leftmost cup"))
    server.assert_clean()
    assert result.status is QueryStatus.SUCCEEDED, result.error
    assert result.rounds == 14 and len(server.main_requests) == 14
    sizes = []
    for request in server.main_requests:
        check_main_request(request.body)
        sizes.append(request.size_bytes)
    # flat: after the first overlay arrives, no request grows beyond 1.25x the round-3 size
    assert max(sizes[2:]) <= 1.25 * sizes[2], sizes
    last_first = message_text(server.main_requests[-1].messages[1])
    assert '"cup"' in last_first and '"mug"' in last_first and '"bowl"' in last_first
    for request in server.verifier_requests:
        assert len(request.messages) == 2 and request.n_images == 3
    verifier_texts = {message_text(r.messages[1]) for r in server.verifier_requests}
    main_texts = {message_text(m) for r in server.main_requests for m in r.messages}
    assert not verifier_texts & main_texts
    assert result.usage.prompt_tokens == 10 * len(server.requests)


def test_images_are_downscaled_and_sent_as_data_urls():
    with ScriptedServer([tool_call("segment_phrase", text_prompt="cup"),
                         tool_call("select_masks_and_return", final_answer_masks=[1])]) as server:
        result = agent_for(server).run(frame(), Query("q", "the cup"))
    assert result.status is QueryStatus.SUCCEEDED
    from test.fakes.scripted_server import decode_image, image_urls

    for url in image_urls(server.main_requests[1].body):
        assert url.startswith("data:image/")
        assert max(decode_image(url).shape[:2]) == 640


@pytest.mark.parametrize("fault", [http_error(500), http_error(429), drop_connection()])
def test_transient_faults_are_retried(fault):
    script = [fault, tool_call("segment_phrase", text_prompt="cup"),
              tool_call("select_masks_and_return", final_answer_masks=[1])]
    with ScriptedServer(script) as server:
        result = agent_for(server).run(frame(), Query("q", "the cup"))
    server.assert_clean()
    assert result.status is QueryStatus.SUCCEEDED


@pytest.mark.parametrize("fault, fragment", [
    (http_error(500), "500"),
    (raw_body("this is not json"), ""),
    (raw_body({}), "choices"),
    (raw_body({"choices": []}), "choices"),
    (http_error(401), "API key"),
    (http_error(404), "llm.model"),
])
def test_persistent_faults_end_the_query_as_failed(fault, fragment):
    with ScriptedServer([fault] * 3) as server:
        result = agent_for(server).run(frame(), Query("q", "the cup"))
    assert result.status is QueryStatus.FAILED
    assert result.error.startswith("LLM request failed")
    assert fragment in result.error


def test_an_unreachable_endpoint_ends_the_query_with_one_line_naming_it_and_the_fix():
    """Issue 21 item 6 and issue 17 item 8: no repeated prefix; the endpoint shown redacted."""
    host_port = closed_port()
    config = Config.from_params({"llm.backend": "openai", "llm.base_url": attack_url(host_port),
                                 "llm.max_retries": 1})
    agent = Agent(config, llm=OpenAiClient(config.llm, backoff_base_s=0.01),
                  segmenter=BoxSegmenter(BOXES))
    result = agent.run(frame(), Query("q", "the cup"))
    assert result.status is QueryStatus.FAILED
    assert result.error.startswith(
        f"LLM request failed: cannot reach the LLM endpoint {redacted_url(host_port)} after 2 "
        "attempts (")
    assert result.error.count("LLM request failed") == 1 and "\n" not in result.error
    assert result.error.endswith("start the server or check llm.base_url; to try without a "
                                 "model: -p llm.backend:=offline -p segmenter.backend:=color")
    assert leaks(json.dumps(result.to_json())) == []


def test_verifier_faults_end_the_query():
    script = [tool_call("segment_phrase", text_prompt="mug"), tool_call("examine_each_mask")]
    with ScriptedServer(script, verifier=[http_error(400, "bad image")]) as server:
        result = agent_for(server).run(frame(), Query("q", "the mug"))
    assert result.status is QueryStatus.FAILED and "verifier request failed" in result.error


def test_no_verdict_from_the_verifier_over_http_rejects_after_retries():
    script = [tool_call("segment_phrase", text_prompt="mug"), tool_call("examine_each_mask"),
              tool_call("report_no_mask")]
    with ScriptedServer(script, verifier=["I am not sure."] * 3) as server:
        result = agent_for(server, verifier_retries=2).run(frame(), Query("q", "the mug"))
    server.assert_clean()
    assert result.status is QueryStatus.NO_MASK
    assert len(server.verifier_requests) == 3


def test_trace_has_no_images_and_no_key(tmp_path, monkeypatch):
    from sam3_agent_ros.llm.trace import TracingClient

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-very-secret-123")
    path = tmp_path / "trace.jsonl"
    with ScriptedServer([tool_call("segment_phrase", text_prompt="cup"),
                         tool_call("select_masks_and_return", final_answer_masks=[1])]) as server:
        agent = agent_for(server)
        agent.llm = TracingClient(agent.llm, path)
        result = agent.run(frame(), Query("q", "the cup"))
        assert server.requests[0].headers["authorization"] == "Bearer sk-test-very-secret-123"
    assert result.status is QueryStatus.SUCCEEDED
    text = path.read_text()
    assert "sk-test-very-secret-123" not in text and "base64" not in text
    assert len([json.loads(line) for line in text.splitlines()]) == 4


def hung_agent(server: SilentServer, **params) -> Agent:
    config = Config.from_params({"llm.backend": "openai", "llm.base_url": server.base_url,
                                 "agent.max_image_side": 640, **params})
    llm = OpenAiClient(config.llm, config.agent.max_image_side, backoff_base_s=0.01)
    return Agent(config, llm=llm, segmenter=BoxSegmenter(BOXES))


def test_a_hung_endpoint_is_named_with_llm_timeout_s():
    """Issue 25: a server that accepts the connection and never answers. The error names the
    endpoint and the bound that expired (llm.timeout_s), not just a timeout."""
    with SilentServer() as server:
        agent = hung_agent(server, **{"llm.timeout_s": 0.5, "llm.max_retries": 1,
                                      "agent.query_timeout_s": 30.0})
        result = agent.run(frame(), Query("q", "the cup"))
        assert server.connections >= 1  # it did connect: hung, not unreachable
    assert result.status is QueryStatus.FAILED
    assert result.error.startswith(f"LLM request failed: the LLM endpoint {server.base_url} did "
                                   f"not answer within 0.5 s (llm.timeout_s) after 2 attempts"), \
        result.error


def test_a_hung_endpoint_is_named_when_the_query_timeout_expires_first():
    """llm.timeout_s longer than the query's time: the query's timeout ends the wait, and the
    error says it was waiting for that endpoint."""
    with SilentServer() as server:
        agent = hung_agent(server, **{"llm.timeout_s": 30.0, "agent.query_timeout_s": 1.0})
        result = agent.run(frame(), Query("q", "the cup"))
    assert result.status is QueryStatus.FAILED
    assert result.error.startswith("query timed out after 1 s waiting for the LLM: the LLM "
                                   f"endpoint {server.base_url} did not answer within "), \
        result.error
    assert "agent.query_timeout_s" in result.error

"""Requests that share their prefix (interface §14): over real HTTP, the calls of a query begin
with the same bytes (the system prompt, then the frame) round after round (round 2 with all of
round 1), the verifier's calls
with the verifier prompt and the same frame, and every robot's calls with the same system
prompt; the body starts with the model's name and the messages, the fleet fields come after
them, so they never split a prefix."""

from __future__ import annotations

import json

import numpy as np

from sam3_agent_ros.config import Config
from sam3_agent_ros.core.agent import Agent
from sam3_agent_ros.core.types import Frame, Query, QueryStatus
from sam3_agent_ros.llm.openai_client import OpenAiClient
from test.fakes.scripted_server import ScriptedServer, tool_call, verdict
from test.fakes.segmenters import BoxSegmenter

BOXES = {"cup": [(100, 100, 200, 200, 0.9), (300, 150, 420, 260, 0.8)]}
KEY_ENV = "SAM3_AGENT_TEST_API_KEY"


def script():
    return [tool_call("segment_phrase", text_prompt="cup"), tool_call("examine_each_mask"),
            tool_call("select_masks_and_return", final_answer_masks=[1])]


def robot(server, number):
    config = Config.from_params({
        "llm.base_url": server.base_url, "llm.api_key_env": KEY_ENV,
        "agent.max_image_side": 320, "llm.priority": number,
        "llm.extra_body": f'{{"cache_salt": "tenant-a", "user": "robot-{number}"}}'})
    return Agent(config, llm=OpenAiClient(config.llm, 320), segmenter=BoxSegmenter(BOXES))


def frame(seed):
    pixels = np.random.default_rng(seed).integers(0, 255, (480, 640, 3), dtype=np.uint8)
    return Frame(pixels, seed, 0, "camera")


def text(messages):
    return json.dumps(messages, ensure_ascii=False)


def test_a_query_and_a_fleet_send_requests_that_share_their_prefix(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "EMPTY")
    main_calls, verifier_calls = {}, {}
    for number in (1, 2):
        with ScriptedServer(script(), verifier=lambda body: verdict(True)) as server:
            result = robot(server, number).run(frame(number), Query("q", "the cup"))
            assert result.status is QueryStatus.SUCCEEDED
        main_calls[number] = [r.body for r in server.main_requests]
        verifier_calls[number] = [r.body for r in server.verifier_requests]
    for number in (1, 2):
        mains, verifiers = main_calls[number], verifier_calls[number]
        assert len(mains) == 3 and len(verifiers) == 2
        for body in mains + verifiers:  # the fleet fields after the messages: never between
            keys = list(body)
            assert keys[:2] == ["model", "messages"] and body["cache_salt"] == "tenant-a"
            assert keys.index("cache_salt") > 1 and keys.index("priority") > 1
        # round after round: the same system prompt and first user message (the frame first)
        head = text(mains[0]["messages"][:2])
        assert all(text(b["messages"][:2]) == head for b in mains)
        assert mains[0]["messages"][1]["content"][0]["type"] == "image_url"
        # round 2 repeats the whole of round 1 at its start (later rounds up to the overlay that
        # a newer one replaced: at most 2 images a request, interface §2)
        assert text(mains[1]["messages"]).startswith(text(mains[0]["messages"])[:-1])
        # the verifier's calls: the verifier prompt, then the same frame as the main calls
        frame_url = mains[0]["messages"][1]["content"][0]["image_url"]["url"]
        for body in verifiers:
            first_part = body["messages"][1]["content"][0]
            assert text(body["messages"][:1]) == text(verifiers[0]["messages"][:1])
            assert first_part["image_url"]["url"] == frame_url
    # across robots on the same frame shape: the same system prompt, then each robot's frame
    assert text(main_calls[1][0]["messages"][:1]) == text(main_calls[2][0]["messages"][:1])
    assert main_calls[1][0]["messages"][1] != main_calls[2][0]["messages"][1]

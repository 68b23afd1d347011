"""examine_each_mask over real HTTP: a failed verifier call cuts its siblings in flight (their
connections close within 1 s, interface §14) instead of leaving them to generate for nobody."""

import threading
import time

import numpy as np

from sam3_agent_ros.config import Config
from sam3_agent_ros.core.agent import Agent
from sam3_agent_ros.core.types import Frame, Query, QueryStatus
from sam3_agent_ros.llm.openai_client import OpenAiClient
from test.fakes.scripted_server import Reply, ScriptedServer, slow, tool_call, verdict
from test.fakes.segmenters import BoxSegmenter

BOXES = {"cup": [(900, 200, 1000, 300, 0.7), (100, 250, 200, 380, 0.9),
                 (500, 150, 600, 260, 0.8)]}
FAIL_AFTER_S = 0.3


def test_a_failed_verifier_call_disconnects_the_others_in_flight(monkeypatch):
    monkeypatch.setenv("SAM3_AGENT_TEST_API_KEY", "EMPTY")
    lock = threading.Lock()
    seen = {"n": 0}

    def verifier(body):
        with lock:
            seen["n"] += 1
            first = seen["n"] == 1
        if first:  # a final error (400), not retried: it ends the query
            return Reply(status=400, error="scripted bad request", delay_s=FAIL_AFTER_S)
        return slow(verdict(True), 20.0)

    script = [tool_call("segment_phrase", text_prompt="cup"), tool_call("examine_each_mask")]
    with ScriptedServer(script, verifier=verifier) as server:
        config = Config.from_params({"llm.base_url": server.base_url, "llm.timeout_s": 30.0,
                                     "llm.api_key_env": "SAM3_AGENT_TEST_API_KEY",
                                     "agent.max_image_side": 320})
        agent = Agent(config, llm=OpenAiClient(config.llm, 320), segmenter=BoxSegmenter(BOXES))
        image = np.random.default_rng(1).integers(0, 255, (720, 1280, 3), dtype=np.uint8)
        started = time.monotonic()
        result = agent.run(Frame(image, 1, 0, "camera"), Query("q", "the cup"))
        took = time.monotonic() - started
        assert result.status is QueryStatus.FAILED and "400" in result.error
        assert took < 5.0  # not the 20 s of the siblings' replies
        verifier_calls = server.verifier_requests
        assert len(verifier_calls) == 3
        failed_at = min(r.received_at for r in verifier_calls) + FAIL_AFTER_S
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline and len(server.disconnects) < 2:
            time.sleep(0.01)
        gone = [server.disconnects[r.index] for r in verifier_calls
                if r.index in server.disconnects]
        assert len(gone) == 2 and all(at - failed_at < 1.0 for at in gone)

"""The node's log is one format (ros/python_logging.py): its Python loggers (openai's, httpx's)
write the lines rclpy writes (``[INFO] [<seconds>.<nanoseconds>] [<name>]: message``), and
httpx's one INFO line per request is quieted (WARNING and above still show). The node answers a
query through an OpenAI-compatible endpoint that fails once (the LLM client logs its retry)."""

from __future__ import annotations

import os
import re

from sam3_agent_demo.scene import render_scene
from sam3_agent_ros.ros.conversions import rgb8_image
from test.fakes.scripted_server import ScriptedServer, http_error, tool_call
from test.ros.helpers import Camera, Harness, NodeProcess

NS = "/logfmt"
RCLPY_LINE = re.compile(r"\[(DEBUG|INFO|WARN|ERROR|FATAL)\] \[\d+\.\d{9}\] \[[^\]\s]+\]: ")


def test_every_log_line_of_the_node_has_the_rclpy_format(ros_env, tmp_path):
    script = [http_error(500, "try again"), tool_call("segment_phrase", text_prompt="blue object"),
              tool_call("select_masks_and_return", final_answer_masks=[1])]
    with ScriptedServer(script) as server:
        parameters = {"llm": {"backend": "openai", "base_url": server.base_url,
                              "max_retries": 1},
                      "segmenter": {"backend": "color"}}
        env = dict(os.environ, **ros_env, OPENAI_API_KEY="sk-test-placeholder")
        node = NodeProcess(NS, parameters, tmp_path, env)
        harness = Harness("log_format_test")
        try:
            harness.listen(f"{NS}/sam3_agent/result")
            harness.wait_state(node.name, "active", timeout=60)
            frame = rgb8_image(render_scene().rgb)
            with Camera(harness, f"{NS}/image", frame):
                harness.wait_subscribed(f"{NS}/image", type(frame))
                harness.send_query(NS, {"id": "log-1", "query": "the blue object"})
                result = harness.wait_result(NS, "log-1", timeout=60)
        finally:
            node.stop()
            harness.close()
        assert server.requests, "the query must have reached the endpoint"
    assert result["status"] == "succeeded", result
    log = node.log()
    lines = [line for line in log.splitlines() if line.startswith("[")]
    retries = [line for line in lines if "LLM request failed (HTTP 500" in line]
    assert retries and retries[0].startswith("[WARN] ["), log  # our Python logger, rclpy's form
    odd = [line for line in lines if not RCLPY_LINE.match(line)]
    assert odd == [], "\n".join(odd)
    assert "HTTP Request:" not in log, log  # httpx's per-request INFO line is quieted

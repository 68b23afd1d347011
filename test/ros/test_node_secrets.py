"""Issue 17 item 8 on the node: ``llm.base_url=http://user:pass@host/v1?api-key=K`` appeared whole
in the result's error. The node answers a query through an endpoint given with credentials;
neither its result, its status nor its log may show them."""

from __future__ import annotations

import json
import os

from sam3_agent_demo.scene import render_scene
from sam3_agent_ros.ros.conversions import rgb8_image
from test.fakes.scripted_server import ScriptedServer, http_error
from test.fakes.secret_url import attack_url, leaks, redacted_url
from test.ros.helpers import Camera, Harness, NodeProcess

NS = "/secrets"


def test_credentials_of_the_endpoint_are_in_no_result_status_or_log(ros_env, tmp_path):
    # The server answers every request with a 404 that quotes the path it got (the SDK puts the
    # query string of base_url in it): the key travels to the server, never back to the user.
    with ScriptedServer([http_error(404, "unused")] * 8) as server:
        host_port = server.base_url.split("//", 1)[1].split("/", 1)[0]
        parameters = {"llm": {"backend": "openai", "base_url": attack_url(host_port),
                              "max_retries": 0},
                      "segmenter": {"backend": "color"}}
        env = dict(os.environ, **ros_env, OPENAI_API_KEY="sk-test-placeholder")
        node = NodeProcess(NS, parameters, tmp_path, env)
        harness = Harness("secrets_test")
        try:
            harness.listen(f"{NS}/sam3_agent/result")
            harness.listen(f"{NS}/sam3_agent/status")
            harness.wait_state(node.name, "active", timeout=60)
            harness.wait_subscribed(f"{NS}/query")
            frame = rgb8_image(render_scene().rgb)
            with Camera(harness, f"{NS}/image", frame):
                harness.wait_subscribed(f"{NS}/image", type(frame))
                harness.send_query(NS, {"id": "leak-1", "query": "the blue cube"})
                result = harness.wait_result(NS, "leak-1", timeout=60)
        finally:
            node.stop()
            harness.close()
        assert server.requests, "the query must have reached the endpoint"
    assert result["status"] == "failed"
    assert result["error"].startswith(
        f"LLM request failed: HTTP 404 from {redacted_url(host_port)}: ")
    statuses = [m.data for m in harness.messages(f"{NS}/sam3_agent/status")]
    assert leaks(json.dumps(result)) == [] and leaks("".join(statuses)) == []
    log = node.log()
    assert redacted_url(host_port) in log  # the failure is logged, redacted
    assert leaks(log) == [], log

"""ros/diagnostics.py: the node's health on /diagnostics, as a monitoring tool sees it over rclpy
(DDS on loopback, by test/conftest.py): no frames -> ERROR, frames -> OK, the LLM endpoint OK
after a call, ERROR after a failed query once it is down."""

from __future__ import annotations

import os
import time

import rclpy
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from rclpy.executors import SingleThreadedExecutor
from rclpy.parameter import Parameter

from sam3_agent_demo.scene import render_scene
from sam3_agent_ros.health import recorder as health
from sam3_agent_ros.ros.conversions import rgb8_image
from sam3_agent_ros.ros.diagnostics import DiagnosticsPublisher, diagnostic_array, status_message
from test.fakes.scripted_server import ScriptedServer, SilentServer, drop_connection, tool_call
from test.ros.helpers import RELIABLE, Camera, Harness, NodeProcess

NS = "/diag"
NODE = f"{NS}/sam3_agent"


def test_a_status_message_is_named_after_the_node_with_its_values():
    status = health.Status("frames", health.Level.WARN, "no frame for 1.5 s on /image",
                           {"topic": "/image", "frames": "12"})
    message = status_message(status, "/robot1/sam3_agent")
    assert message.level == DiagnosticStatus.WARN == b"\x01"
    assert message.name == "/robot1/sam3_agent: frames"
    assert message.hardware_id == "/robot1/sam3_agent"
    assert message.message == "no frame for 1.5 s on /image"
    assert [(v.key, v.value) for v in message.values] == [("topic", "/image"), ("frames", "12")]


def test_the_array_holds_every_area_in_order():
    recorder = health.HealthRecorder()
    params = {"max_frame_age_s": 2.0, "llm.backend": "offline", "llm.base_url": "http://x/v1",
              "llm.model": "m", "llm.timeout_s": 60.0, "segmenter.backend": "color",
              "segmenter.random_weights": False, "query_policy": "preempt", "queue_size": 8}
    array = diagnostic_array(health.snapshot(recorder, params), "/sam3_agent")
    assert [s.name for s in array.status] == [
        "/sam3_agent: frames", "/sam3_agent: LLM endpoint", "/sam3_agent: segmenter",
        "/sam3_agent: queries", "/sam3_agent: follow"]
    assert [s.level for s in array.status] == [DiagnosticStatus.WARN, DiagnosticStatus.OK,
                                               DiagnosticStatus.WARN, DiagnosticStatus.OK,
                                               DiagnosticStatus.OK]


def test_the_publisher_reports_on_steady_time_even_with_sim_time_and_no_clock(ros_env):
    """use_sim_time without /clock: a node-clock timer would never fire."""
    context = rclpy.Context()
    rclpy.init(context=context)
    executor = SingleThreadedExecutor(context=context)
    try:
        node = rclpy.create_node("sam3_agent", namespace="/diag_sim", context=context,
                                 parameter_overrides=[Parameter("use_sim_time", value=True)])
        received: list[DiagnosticArray] = []
        node.create_subscription(DiagnosticArray, "/diagnostics", received.append, RELIABLE)
        params = {"max_frame_age_s": 2.0, "llm.backend": "offline", "llm.base_url": "",
                  "llm.model": "m", "llm.timeout_s": 60.0, "segmenter.backend": "color",
                  "segmenter.random_weights": False, "query_policy": "preempt",
                  "queue_size": 8}
        recorder = health.HealthRecorder()
        DiagnosticsPublisher(node, lambda: health.snapshot(recorder, params), period_s=0.2)
        executor.add_node(node)
        deadline = time.monotonic() + 20.0
        while len(received) < 2 and time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.1)
        assert len(received) >= 2
        assert received[0].status[0].name == "/diag_sim/sam3_agent: frames"
        assert received[0].header.stamp.sec == 0  # the node's (simulated) clock
    finally:
        executor.shutdown(timeout_sec=2.0)
        rclpy.shutdown(context=context)


def latest(harness: Harness, area: str, node: str = NODE) -> DiagnosticStatus | None:
    """The newest status of ``area`` the node published (None: none yet)."""
    for array in reversed(harness.messages("/diagnostics")):
        for status in array.status:
            if status.name == f"{node}: {area}":
                return status
    return None


def wait_level(harness: Harness, area: str, level: bytes, contains: str = "",
               timeout: float = 30.0, node: str = NODE) -> DiagnosticStatus:
    def seen():
        status = latest(harness, area, node)
        return status if status is not None and status.level == level and \
            contains in status.message else None
    return harness.wait_for(seen, timeout, f"/diagnostics '{area}' at level {level!r} saying "
                                           f"{contains!r} (last: {latest(harness, area, node)})")


def test_diagnostics_of_a_running_node(ros_env, tmp_path):
    # One answer, then the endpoint goes: the open connection drops, new ones are refused.
    server = ScriptedServer([tool_call("report_no_mask"), drop_connection()]).start()
    endpoint = server.base_url
    parameters = {"llm": {"backend": "openai", "base_url": endpoint, "max_retries": 0,
                          "api_key_env": ""},
                  "segmenter": {"backend": "color"}, "max_frame_age_s": 1.0,
                  "frame_wait_s": 0.5}
    node = NodeProcess(NS, parameters, tmp_path, dict(os.environ, **ros_env), offline=False)
    harness = Harness("diagnostics_test")
    try:
        harness.listen("/diagnostics", DiagnosticArray)
        harness.listen(f"{NODE}/result")
        harness.wait_state(node.name, "active", timeout=60)

        # No camera: an error naming the topic, once a query would find no frame.
        frames = wait_level(harness, "frames", DiagnosticStatus.ERROR,
                            f"no frame received on {NS}/image")
        assert frames.hardware_id == NODE
        for area, message in (("segmenter", "colour demo segmenter"),
                              ("LLM endpoint", f"LLM endpoint {endpoint}: no call yet"),
                              ("queries", "idle"), ("follow", "not following")):
            status = latest(harness, area)
            assert status.level == DiagnosticStatus.OK and message in status.message, status

        with Camera(harness, f"{NS}/image", rgb8_image(render_scene().rgb), rate_hz=10.0):
            frames = wait_level(harness, "frames", DiagnosticStatus.OK, f"Hz on {NS}/image")
            assert dict((v.key, v.value) for v in frames.values)["topic"] == f"{NS}/image"

            harness.send_query(NS, {"id": "up", "query": "the blue cube"})
            assert harness.wait_result(NS, "up", timeout=60)["status"] == "no_mask"
            wait_level(harness, "LLM endpoint", DiagnosticStatus.OK, "last call ok")

            server.stop()
            harness.send_query(NS, {"id": "down", "query": "the blue cube"})
            assert harness.wait_result(NS, "down", timeout=60)["status"] == "failed"
            llm = wait_level(harness, "LLM endpoint", DiagnosticStatus.ERROR,
                             f"LLM endpoint {endpoint} unreachable: ")
            assert "(1 attempt, " in llm.message and "; last ok " in llm.message

        wait_level(harness, "frames", DiagnosticStatus.ERROR, "no frame for")  # camera gone
    finally:
        server.stop()
        node.stop()
        harness.close()



def test_a_hung_endpoint_is_named_in_the_result_and_warned_of(ros_env, tmp_path):
    """Issue 25: an LLM server that accepts the connection and never answers, with llm.timeout_s
    longer than the query's time. The result said only "query timed out" and /diagnostics said
    OK ("no call yet"): it names the endpoint in both now, the status at WARN."""
    ns = "/diag_hung"
    with SilentServer() as server:
        endpoint = server.base_url
        parameters = {"llm": {"backend": "openai", "base_url": endpoint, "timeout_s": 60.0,
                              "max_retries": 0, "api_key_env": ""},
                      "agent": {"query_timeout_s": 2.0}, "segmenter": {"backend": "color"}}
        node = NodeProcess(ns, parameters, tmp_path, dict(os.environ, **ros_env), offline=False)
        harness = Harness("diagnostics_hung_test")
        try:
            harness.listen("/diagnostics", DiagnosticArray)
            harness.listen(f"{ns}/sam3_agent/result")
            harness.wait_state(node.name, "active", timeout=60)
            with Camera(harness, f"{ns}/image", rgb8_image(render_scene().rgb), rate_hz=10.0):
                harness.send_query(ns, {"id": "hung", "query": "the blue cube"})
                result = harness.wait_result(ns, "hung", timeout=60)
            assert result["status"] == "failed"
            assert result["error"].startswith(
                f"query timed out after 2 s waiting for the LLM: the LLM endpoint {endpoint} "
                "did not answer within "), result
            assert server.connections >= 1
            llm = wait_level(harness, "LLM endpoint", DiagnosticStatus.WARN,
                             f"LLM endpoint {endpoint} did not answer within ",
                             node=node.name)
            assert "(1 attempt, " in llm.message, llm.message
        finally:
            node.stop()
            harness.close()

"""The harness both demos share: the node subprocess under the demo's parameters for the length
of a session, errors and interruptions into the report, the node always stopped, SIGTERM's
handler given back (the output lock: test_tabletop_demo.py, for both demos)."""

from __future__ import annotations

import io
import json
import os
import signal
import threading

import pytest
import yaml

from sam3_agent_demo import harness, sample
from sam3_agent_demo.harness import DemoOptions
from sam3_agent_demo.listener import Listener
from sam3_agent_demo.report import DemoReport
from sam3_agent_ros.config import OFFLINE_BACKENDS, nest

PARAMETERS = {**nest(OFFLINE_BACKENDS), "image_qos": "reliable"}


@pytest.fixture
def environ():
    """apply_demo_env writes os.environ: give it back as it was."""
    saved = dict(os.environ)
    yield
    os.environ.clear()
    os.environ.update(saved)


def _session_that_fails_after_talking_to_the_node(seen: dict):
    def session(process):
        from std_msgs.msg import String

        listener = Listener("harness_test")
        statuses = threading.Event()
        listener.node.create_subscription(String, "/sam3_agent/status",
                                          lambda m: statuses.set(), 10)
        publisher = listener.node.create_publisher(String, sample.QUERY_TOPIC, 10)
        try:
            listener.start()
            listener.wait_for_node(process, 60.0, subscribed=(sample.QUERY_TOPIC,),
                                   published=("/sam3_agent/status",))
            seen["running"] = process.running()
            seen["sigterm"] = signal.getsignal(signal.SIGTERM)
            deadline = 30.0
            while not statuses.wait(1.0) and deadline > 0:  # no frame yet: still one status
                publisher.publish(String(data=json.dumps({"id": "h-1", "query": "anything"})))
                deadline -= 1.0
            seen["status"] = statuses.is_set()
        finally:
            listener.close()
        seen["process"] = process
        raise RuntimeError("the session failed on purpose")
    return session


def test_the_node_runs_for_the_session_and_is_stopped_when_it_fails(tmp_path, environ):
    options = DemoOptions(out_dir=tmp_path, overrides=["agent.max_rounds:=3"])
    report, printed, seen = DemoReport(), io.StringIO(), {}
    before = signal.getsignal(signal.SIGTERM)
    harness.run_node("test", options, PARAMETERS, tmp_path, report, printed,
                     _session_that_fails_after_talking_to_the_node(seen))
    assert seen["running"] and seen["status"], printed.getvalue()
    assert seen["sigterm"] is not before  # SIGTERM interrupts the session...
    assert signal.getsignal(signal.SIGTERM) is before  # ...and only the session
    assert not seen["process"].running()
    assert report.error == "the session failed on purpose"
    assert report.node_log == str(tmp_path / "node.log")
    assert f"[test] node log ({tmp_path / 'node.log'}), last lines:" in printed.getvalue()
    assert "[test] DDS on loopback, ROS_DOMAIN_ID=" in printed.getvalue()
    written = yaml.safe_load((tmp_path / "demo_params.yaml").read_text())
    assert written == {"/**": {"ros__parameters": PARAMETERS}}


def test_an_interrupted_session_stops_the_node_and_says_interrupted(tmp_path, environ):
    report, printed, seen = DemoReport(), io.StringIO(), {}

    def session(process):
        seen["process"] = process
        os.kill(os.getpid(), signal.SIGTERM)  # as `kill` or a CI timeout would
        raise AssertionError("SIGTERM did not interrupt the session")

    harness.run_node("test", DemoOptions(out_dir=tmp_path), PARAMETERS, tmp_path, report,
                     printed, session)
    assert report.error == "interrupted"
    assert not seen["process"].running()
    assert "node log" not in printed.getvalue()


def test_a_domain_id_that_is_not_one_starts_no_node(tmp_path, environ):
    os.environ["ROS_DOMAIN_ID"] = "robot7"
    report = DemoReport()
    harness.run_node("test", DemoOptions(out_dir=tmp_path), PARAMETERS, tmp_path, report,
                     io.StringIO(), lambda process: pytest.fail("no node should start"))
    assert "ROS_DOMAIN_ID='robot7' is not a domain id" in report.error
    assert not (tmp_path / "node.log").exists()


def test_the_output_lock_refuses_a_second_holder(tmp_path):
    with (harness.output_lock(tmp_path / "out"),
          pytest.raises(harness.OutputBusy, match="another demo is writing to"),
          harness.output_lock(tmp_path / "out")):
        pass
    with harness.output_lock(tmp_path / "out"):  # free again
        pass

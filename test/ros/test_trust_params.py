"""Parameters as a peer on the DDS domain would attack them, and the start-up mistakes the node
must answer with the fix (typos, bad read-only values, autostart off).

The node runs as a user starts it (a subprocess, DDS on loopback); the attacker is a plain
rclpy parameter client (``Harness``): whatever any participant on the domain can send. The node of
the module talks to the operator's endpoint (a scripted OpenAI-compatible server answering like
the offline planner, test/fakes/offline_responder.py); the attacker runs its own endpoint.
"""

from __future__ import annotations

import os
import subprocess
import time

import pytest
from rcl_interfaces.msg import ParameterType

from sam3_agent_demo.scene import render_scene
from sam3_agent_ros.ros.conversions import rgb8_image
from test.fakes.offline_responder import offline_responder
from test.fakes.scripted_server import ScriptedServer
from test.ros.helpers import NOT_SET, TRANSITION, Camera, Harness, NodeProcess

NS = "/trusted"
NODE = f"{NS}/sam3_agent"
KEY_VARIABLE = "SAM3_TRUST_TEST_KEY"
OPERATOR_KEY = "operator-key-123"
OTHER_SECRET = "SAM3_TRUST_TEST_OTHER_SECRET"
QUERY = "the leftmost blue object"
ORIGINAL_MODEL = "operator-model"
RESTART = "restart the node"


@pytest.fixture(scope="module")
def endpoints():
    with ScriptedServer(responder=offline_responder()) as operator, \
            ScriptedServer(responder=offline_responder()) as attacker:
        yield operator, attacker


@pytest.fixture(scope="module")
def trusted(ros_env, tmp_path_factory, endpoints):
    """The node of the operator (real OpenAI client, colour segmenter) and the attacker."""
    operator, _ = endpoints
    env = dict(os.environ, **ros_env, **{KEY_VARIABLE: OPERATOR_KEY,
                                         OTHER_SECRET: "not-for-the-attacker"})
    proc = NodeProcess(NS, {"llm": {"backend": "openai", "base_url": operator.base_url,
                                    "api_key_env": KEY_VARIABLE, "model": ORIGINAL_MODEL,
                                    "max_retries": 0}},
                       tmp_path_factory.mktemp("trusted"), env)
    harness = Harness("sam3_agent_attacker")
    try:
        harness.listen(f"{NS}/sam3_agent/result")
        harness.wait_state(NODE, "active", timeout=60)
        yield harness, proc
    finally:
        proc.stop()
        harness.close()


def cycle_lifecycle(harness: Harness) -> None:
    for transition in (TRANSITION.TRANSITION_DEACTIVATE, TRANSITION.TRANSITION_CLEANUP,
                       TRANSITION.TRANSITION_CONFIGURE, TRANSITION.TRANSITION_ACTIVATE):
        assert harness.change_state(NODE, transition), transition
    harness.wait_state(NODE, "active")


def test_a_peer_cannot_redirect_the_endpoint_the_key_or_the_code_across_a_cycle(
        trusted, endpoints):
    """The exfiltration of issue 17: point the node at the attacker's server with another
    variable as the key, load code, cycle the lifecycle, query. Everything stays the
    operator's; only the tuning change the attacker could make takes effect."""
    harness, proc = trusted
    operator, attacker = endpoints
    attempts = {"llm.backend": "openai", "llm.base_url": attacker.base_url,
                "llm.api_key_env": OTHER_SECRET, "segmenter.backend": "os:abort",
                "segmenter.checkpoint": "/tmp/evil.pt", "agent.prompts_dir": "/tmp",
                "max_query_chars": 10**9, "queue_size": 1000}
    for name, value in attempts.items():
        result = harness.set_parameter(NODE, name, value)
        assert not result.successful, name
        assert result.reason.startswith(f"{name} is read-only after start-up"), result.reason
        assert RESTART in result.reason and f"-p {name}:=VALUE" in result.reason
    assert harness.set_parameter(NODE, "llm.model", "attacker-model").successful  # tuning

    cycle_lifecycle(harness)
    with Camera(harness, f"{NS}/image", rgb8_image(render_scene().rgb)):
        harness.send_query(NS, {"id": "after-cycle", "query": QUERY})
        result = harness.wait_result(NS, "after-cycle", timeout=30)
    assert result["status"] == "succeeded", result
    assert attacker.requests == []
    assert operator.main_requests
    request = operator.main_requests[-1]
    assert request.headers["authorization"] == f"Bearer {OPERATOR_KEY}"
    assert request.body["model"] == "attacker-model"  # the cycle re-read the parameters
    assert proc.process.poll() is None  # os:abort never ran
    current = harness.get_parameters(NODE, list(attempts))
    assert current["llm.base_url"] == operator.base_url
    assert current["llm.api_key_env"] == KEY_VARIABLE
    assert current["segmenter.backend"] == "color"


def test_every_set_path_refuses_read_only_parameters_and_keeps_the_rest(trusted):
    """``ros2 param set`` (one), ``ros2 param load`` (a list in one set_parameters request),
    set_parameters_atomically and a value-less parameter (a request to undeclare it)."""
    harness, _ = trusted
    loaded = harness.set_parameters(NODE, {"agent.max_rounds": 7, "llm.base_url": "http://x/v1",
                                           "llm.temperature": 0.5})
    assert [r.successful for r in loaded] == [True, False, True]
    assert RESTART in loaded[1].reason

    atomic = harness.set_parameters_atomically(
        NODE, {"agent.max_rounds": 9, "segmenter.backend": "this:s"})
    assert not atomic.successful and atomic.reason.startswith("segmenter.backend is read-only")
    assert harness.get_parameters(NODE, ["agent.max_rounds"]) == {"agent.max_rounds": 7}

    (unset,) = harness.set_parameters(NODE, {"llm.api_key_env": NOT_SET})
    assert not unset.successful and RESTART in unset.reason
    assert harness.get_parameters(NODE, ["llm.api_key_env"]) == {"llm.api_key_env": KEY_VARIABLE}

    (descriptor,) = harness.describe_parameters(NODE, ["llm.base_url"])
    assert descriptor.read_only and "read-only: set at start-up" in \
        descriptor.additional_constraints
    assert descriptor.type == ParameterType.PARAMETER_STRING


def test_an_accepted_change_is_logged_once_escaped_and_bounded(trusted):
    """A peer's value with a newline cannot forge a log line, and 4 kB are not logged whole
    (1 MB is not even accepted: a string parameter holds at most 4096 characters)."""
    harness, proc = trusted
    huge = harness.set_parameter(NODE, "llm.model", "y" * 1_000_000)
    assert not huge.successful and "1000000 characters, more than the 4096" in huge.reason
    forged = "x\n[ERROR] [0.0] [sam3_agent]: forged line" + "y" * 4000
    assert harness.set_parameter(NODE, "llm.model", forged).successful
    line = harness.wait_for(
        lambda: [ln for ln in proc.log().splitlines() if "parameter changed: llm.model" in ln
                 and "forged" in ln], 10, "the change's log line")
    assert len(line) == 1
    assert "'attacker-model' -> 'x\\n[ERROR] [0.0] [sam3_agent]: forged line" in line[0]
    assert "chars)" in line[0] and len(line[0]) < 400
    assert not any(ln.startswith("[ERROR] [0.0]") for ln in proc.log().splitlines())
    assert harness.set_parameter(NODE, "llm.model", ORIGINAL_MODEL).successful


def wait_log(harness: Harness, proc: NodeProcess, text: str, timeout: float = 30) -> str:
    harness.wait_for(lambda: text in proc.log(), timeout, repr(text))
    return proc.log()


def ended_by_itself(proc: NodeProcess, timeout: float = 30.0) -> int | None:
    """The node's exit status once it ended on its own within ``timeout`` s, else None."""
    try:
        return proc.process.wait(timeout)
    except subprocess.TimeoutExpired:
        return None


@pytest.mark.parametrize("how", ["params-file", "-p"])
def test_a_typo_in_an_override_is_refused_with_the_closest_name(trusted, tmp_path, how):
    """``llm.backnd`` would have been dropped silently, leaving the default backend. Under
    autostart (params-file) the node then exits with status 1, so launch or systemd see it die;
    with autostart false (-p) it stays up, unconfigured, and refuses a configure."""
    harness, _ = trusted
    ns = "/typo_file" if how == "params-file" else "/typo_arg"
    if how == "params-file":
        proc = NodeProcess(ns, {"llm": {"backnd": "offline"}}, tmp_path)
    else:  # with autostart false as well: it must not configure when told either
        proc = NodeProcess(ns, {"autostart": False}, tmp_path,
                           ros_args=("-p", "llm.backnd:=offline"))
    name = f"{ns}/sam3_agent"
    try:
        if how == "params-file":
            status = ended_by_itself(proc)
            log = proc.log()
            assert status == 1, log
            assert "autostart: configure failed" in log and "Traceback" not in log
        else:  # the node writes these lines one after the other: wait for the last of them
            log = wait_log(harness, proc, "llm.backnd (not a parameter: remove or correct it)")
        assert "llm.backnd (not a parameter: remove or correct it)" in log
        assert "unknown parameter 'llm.backnd'" in log
        assert "[ERROR]" in log and "(did you mean 'llm.backend'?)" in log
        if how == "-p":
            assert "autostart is false" not in log  # it would say how to configure
            assert not harness.change_state(name, TRANSITION.TRANSITION_CONFIGURE)
            assert harness.lifecycle_state(name) == "unconfigured"
    finally:
        assert proc.stop() == (1 if how == "params-file" else 0)


def test_rclpy_s_own_parameters_are_not_typos(trusted, tmp_path):
    harness, _ = trusted
    proc = NodeProcess("/own_params", {"use_sim_time": False}, tmp_path,
                       ros_args=("-p", "qos_overrides./parameter_events.publisher.depth:=100"))
    try:
        harness.wait_state("/own_params/sam3_agent", "active", timeout=60)
        assert "unknown parameter" not in proc.log()
    finally:
        assert proc.stop() == 0


def test_a_bad_read_only_start_up_value_asks_for_a_restart_not_a_set(trusted, tmp_path):
    """A wrong backend or plugin cannot be fixed at runtime any more: the node says to restart
    it with a corrected value, and a set is refused (autostart false: the node stays up to be
    asked; under autostart it exits: see the typo test)."""
    harness, _ = trusted
    proc = NodeProcess("/bad_backend", {"llm": {"backend": "bogus"}, "autostart": False},
                       tmp_path)
    name = "/bad_backend/sam3_agent"
    try:
        wait_log(harness, proc, "autostart is false")
        assert not harness.change_state(name, TRANSITION.TRANSITION_CONFIGURE)
        log = wait_log(harness, proc, "to configure: restart the node")
        assert "cannot configure: llm.backend: 'bogus' is not one of" in log
        assert "restart the node with corrected start-up values" in log and "for: llm.backend" \
            in log
        assert "fix the parameters, then" not in log
        assert not harness.set_parameter(name, "llm.backend", "offline").successful
        assert not harness.change_state(name, TRANSITION.TRANSITION_CONFIGURE)
        assert harness.lifecycle_state(name) == "unconfigured"
    finally:
        assert proc.stop() == 0


def test_a_plugin_that_cannot_load_at_start_up_says_both_ways_out(trusted, tmp_path):
    """Plugins stay allowed at start-up; one that fails names the restart and, for causes
    outside the node, the configure command in both forms; under autostart the node then exits
    with status 1 and says how to fix it in place instead (autostart false)."""
    harness, _ = trusted
    proc = NodeProcess("/bad_plugin", {"segmenter": {"backend": "no_such_module:factory"}},
                       tmp_path)
    try:
        status = ended_by_itself(proc)
        log = proc.log()
        assert status == 1, log
        assert "autostart: configure failed" in log and "Traceback" not in log
        assert "cannot build the backends" in log and "no_such_module" in log
        assert "restart the node with a corrected value" in log
        assert "'ros2 lifecycle set /bad_plugin/sam3_agent configure'" in log
        assert "'sam3-agent lifecycle configure --node /bad_plugin/sam3_agent'" in log
        assert "start it with autostart:=false" in log
        assert "'sam3-agent lifecycle activate --node /bad_plugin/sam3_agent'" in log
    finally:
        assert proc.stop() == 1


def test_autostart_false_says_once_how_to_configure_and_activate(trusted, tmp_path):
    harness, _ = trusted
    proc = NodeProcess("/manual", {"autostart": False}, tmp_path)
    name = "/manual/sam3_agent"
    try:
        log = wait_log(harness, proc, "autostart is false")
        hint = [ln for ln in log.splitlines() if "autostart is false" in ln]
        assert len(hint) == 1
        for command in (f"'ros2 lifecycle set {name} configure'",
                        f"'ros2 lifecycle set {name} activate'",
                        f"'sam3-agent lifecycle configure --node {name}'",
                        f"'sam3-agent lifecycle activate --node {name}'"):
            assert command in hint[0]
        time.sleep(1.0)
        assert harness.lifecycle_state(name) == "unconfigured"  # it waits for the operator
        assert harness.change_state(name, TRANSITION.TRANSITION_CONFIGURE)
        assert harness.change_state(name, TRANSITION.TRANSITION_ACTIVATE)
    finally:
        assert proc.stop() == 0

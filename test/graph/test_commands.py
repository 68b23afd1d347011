"""``sam3-agent lifecycle | param | ask --ros --topic | ask --ros --stop-follow`` against a real
node (subprocess, offline backends, DDS on loopback), each command run as a user runs it: the
venv's ``sam3-agent`` script in a process of its own, with the environment of the session."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from std_msgs.msg import String

from sam3_agent_demo.scene import render_scene
from sam3_agent_ros.ros.conversions import rgb8_image
from test.ros.helpers import Camera, Harness, NodeProcess

NS = "/g1"
NODE = f"{NS}/sam3_agent"
QUERY = "the leftmost blue object"


def sam3_agent(*args: str, timeout_s: float = 120.0) -> subprocess.CompletedProcess:
    script = Path(sys.executable).parent / "sam3-agent"
    command = [str(script)] if script.exists() else [sys.executable, "-m", "sam3_agent_ros.cli"]
    return subprocess.run([*command, *args], capture_output=True, text=True, timeout=timeout_s,
                          env=dict(os.environ))  # the session's loopback DDS environment


@pytest.fixture(scope="module")
def ros(ros_env, tmp_path_factory):
    node = NodeProcess(NS, {"max_query_chars": 500}, tmp_path_factory.mktemp("graph_node"),
                       dict(os.environ, **ros_env))
    harness = Harness("sam3_agent_graph_test")
    try:
        harness.listen(f"{NODE}/follow/status", String)
        harness.wait_state(NODE, "active", timeout=60)
        yield harness, node
    finally:
        node.stop()
        harness.close()


@pytest.fixture(scope="module")
def camera(ros):
    harness, _ = ros
    with Camera(harness, f"{NS}/image", rgb8_image(render_scene().rgb),
                frame_id="camera_color_optical_frame") as running:
        yield running


def test_lifecycle_verbs_walk_the_node_through_its_states(ros):
    assert sam3_agent("lifecycle", "get", "--node", NODE).stdout == "active\n"
    refused = sam3_agent("lifecycle", "activate", "--node", NODE)
    assert refused.returncode == 1
    assert (f"{NODE} is active: cannot activate from there (available: deactivate, shutdown)"
            in refused.stderr)
    for verb, state in (("deactivate", "inactive"), ("cleanup", "unconfigured"),
                        ("configure", "inactive"), ("activate", "active")):
        done = sam3_agent("lifecycle", verb, "--node", NODE)
        assert (done.returncode, done.stdout) == (0, f"{verb}: done, {NODE} is {state}\n"), \
            done.stderr
    assert sam3_agent("lifecycle", "get", "--node", NODE.lstrip("/")).stdout == "active\n"


def test_param_verbs_read_set_and_explain(ros):
    assert sam3_agent("param", "get", "llm.backend", "--node", NODE).stdout == "offline\n"
    assert "llm.backend" in sam3_agent("param", "list", "--node", NODE).stdout.splitlines()
    described = sam3_agent("param", "describe", "agent.max_rounds", "--node", NODE).stdout
    assert "type: integer" in described and "integer range: 1 .. 200" in described
    done = sam3_agent("param", "set", "agent.max_rounds", "12", "--node", NODE)
    assert (done.returncode, done.stdout) == (0, f"set: agent.max_rounds = 12{AT_CONFIGURE}\n")
    assert sam3_agent("param", "get", "agent.max_rounds", "--node", NODE).stdout == "12\n"
    # A double given as an integer is converted to the declared type, not refused for its type.
    done = sam3_agent("param", "set", "agent.query_timeout_s", "90", "--node", NODE)
    assert (done.returncode, done.stdout) == (0, "set: agent.query_timeout_s = 90.0"
                                                 f"{AT_CONFIGURE}\n")


AT_CONFIGURE = (" (takes effect at the next configure: deactivate, cleanup, configure, activate "
                f"(sam3-agent lifecycle VERB --node {NODE}))")


def test_param_takes_the_ros2_order_and_says_when_a_value_applies(ros):
    """``ros2 param set <node> <name> <value>`` was refused (issue 25); a value that applies
    only after a reconfigure said ``set:`` like one applied at once."""
    done = sam3_agent("param", "set", NODE, "agent.max_rounds", "11")
    assert (done.returncode, done.stdout) == (0, f"set: agent.max_rounds = 11{AT_CONFIGURE}\n"), \
        done.stderr
    assert sam3_agent("param", "get", NODE, "agent.max_rounds").stdout == "11\n"
    assert "type: integer" in sam3_agent("param", "describe", NODE, "agent.max_rounds").stdout
    assert "agent.max_rounds" in sam3_agent("param", "list", NODE).stdout.splitlines()
    live = sam3_agent("param", "set", NODE, "concepts.rate_hz", "4.0")
    assert (live.returncode, live.stdout) == (0, "set: concepts.rate_hz = 4.0 (applied now)\n")
    same = sam3_agent("param", "set", NODE, "concepts.rate_hz", "5.0", "--node", NODE)
    assert same.returncode == 0, same.stderr
    read_only = sam3_agent("param", "set", NODE, "llm.backend", "openai")
    assert read_only.returncode == 1 and "read-only after start-up: restart the node" \
        in read_only.stdout


@pytest.mark.parametrize("args, message", [
    (["param", "set", "/a/sam3_agent", "agent.max_rounds", "3", "--node", "/b/sam3_agent"],
     "the node is given twice: /a/sam3_agent and --node /b/sam3_agent"),
    (["param", "set", "concepts.prompts", "[a,", "b]"],
     "concepts.prompts is a parameter, not a node: quote a value with spaces"),
    (["param", "get", "/a/sam3_agent", "x", "y"], "expected [NODE] NAME"),
    (["param", "set", "/a/sam3_agent"], "expected [NODE] NAME VALUE"),
])
def test_param_words_that_do_not_fit_exit_2(args, message, capsys):
    from sam3_agent_ros.cli import main

    with pytest.raises(SystemExit) as caught:
        main(args)
    assert caught.value.code == 2 and message in capsys.readouterr().err


def test_a_deep_or_huge_value_on_the_command_line_is_a_usage_error(ros):
    deep = sam3_agent("param", "set", NODE, "concepts.prompts", "[" * 5000)
    assert deep.returncode == 2 and "is not a list of strings" in deep.stderr
    huge = sam3_agent("param", "set", NODE, "agent.max_rounds", "[" * 100_000)
    assert huge.returncode == 2 and "more than 65536" in huge.stderr
    assert "Traceback" not in deep.stderr + huge.stderr


def test_param_set_prints_the_nodes_refusal_and_usage_mistakes(ros):
    refused = sam3_agent("param", "set", "agent.max_rounds", "0", "--node", NODE)
    assert refused.returncode == 1
    assert refused.stdout.startswith("refused: agent.max_rounds = 0: ")
    assert "out of range" in refused.stdout  # the node's own reason
    not_a_number = sam3_agent("param", "set", "agent.max_rounds", "many", "--node", NODE)
    assert not_a_number.returncode == 2
    assert "'many' is not an integer" in not_a_number.stderr
    typo = sam3_agent("param", "get", "agent.max_round", "--node", NODE)
    assert typo.returncode == 1
    assert f"{NODE} has no parameter 'agent.max_round' (did you mean 'agent.max_rounds'?)" \
        in typo.stderr


def test_ask_on_the_topic_prints_the_matching_result(ros, camera):
    asked = sam3_agent("ask", "--ros", "--topic", QUERY, "--node", NODE, "--id", "topic-1",
                       "--timeout", "60", "--feedback")
    assert asked.returncode == 0, asked.stderr
    result = json.loads(asked.stdout)
    assert (result["query_id"], result["query"], result["status"]) == ("topic-1", QUERY,
                                                                      "succeeded")
    assert camera.sent(result["stamp"])
    phases = [json.loads(line)["phase"] for line in asked.stderr.splitlines()
              if line.startswith("{")]
    assert phases[0] == "queued" and phases[-1] == "done"
    # Longer than max_query_chars: the node cannot read the id, and answers under its own.
    failed = sam3_agent("ask", "--ros", "--topic", "x" * 600, "--node", NODE, "--timeout", "60")
    assert failed.returncode == 1, failed.stderr
    answer = json.loads(failed.stdout)
    assert answer["status"] == "failed" and "max_query_chars" in answer["error"]


def test_stop_follow_by_service_and_by_topic(ros, camera):
    harness, _ = ros
    not_following = sam3_agent("ask", "--ros", "--stop-follow", "--node", NODE)
    assert not_following.returncode == 1
    assert json.loads(not_following.stdout) == {"success": False, "message": "not following"}
    for how, reason in (([], "~/stop_follow service called"),
                        (["--topic"], "stop_follow on the query topic")):
        query_id = f"follow-{len(how)}"
        followed = sam3_agent("ask", "--ros", "--topic", QUERY, "--follow", "--id", query_id,
                              "--node", NODE, "--timeout", "60")
        assert followed.returncode == 0, followed.stderr
        stopped = sam3_agent("ask", "--ros", "--stop-follow", *how, "--node", NODE)
        assert stopped.returncode == 0, stopped.stderr
        harness.wait_for(lambda q=query_id, r=reason: [
            s for s in harness.json_messages(f"{NODE}/follow/status")
            if s["query_id"] == q and s["state"] == "stopped" and s["reason"] == r],
            30, f"{query_id} stopped by {reason}")


def test_commands_say_when_no_node_answers(ros):
    absent = "/nobody/sam3_agent"
    lifecycle = sam3_agent("lifecycle", "get", "--node", absent, "--timeout", "1")
    assert lifecycle.returncode == 1
    assert f"no node {absent} answering" in lifecycle.stderr
    assert f"ROS_DOMAIN_ID={os.environ['ROS_DOMAIN_ID']}" in lifecycle.stderr
    asked = sam3_agent("ask", "--ros", "--topic", QUERY, "--node", absent, "--timeout", "1")
    assert asked.returncode == 1
    assert "no node to ask after 1 s: nobody subscribes to /nobody/query" in asked.stderr
    # A wrong --node lists the nodes it can see, the right one among them (once discovery has
    # had the time a real wait gives it: the action form waits for its server that long).
    action = sam3_agent("ask", "--ros", QUERY, "--node", absent, "--timeout", "5")
    assert action.returncode == 1
    assert "no action server /nobody/sam3_agent/segment after 5 s; nodes visible: " \
        in action.stderr
    assert NODE in _visible(action.stderr), action.stderr


def _visible(stderr: str) -> list[str]:
    return stderr.partition("nodes visible: ")[2].split("\n")[0].split(", ")


def test_ask_on_the_topic_says_after_10_s_that_the_node_is_missing(ros):
    """Like the action form (no action server after 10 s), not at --timeout (60 s here)."""
    started = time.monotonic()
    asked = sam3_agent("ask", "--ros", "--topic", QUERY, "--node", "/nobody/sam3_agent",
                       "--timeout", "60")
    waited = time.monotonic() - started
    assert asked.returncode == 1
    assert "no node to ask after 10 s: nobody subscribes to /nobody/query" in asked.stderr
    assert NODE in _visible(asked.stderr), asked.stderr
    assert waited < 30, waited


@pytest.mark.parametrize("args, message", [
    (["lifecycle", "get", "--timeout", "0"], "--timeout must be > 0"),
    (["param", "list", "--node", ""], "--node: the node name is empty"),
])
def test_usage_errors_exit_2_before_touching_ros(args, message, capsys):
    from sam3_agent_ros.cli import main

    assert main(args) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("args", [["lifecycle", "reboot"], ["param", "set", "agent.max_rounds"],
                                  ["param"]])
def test_malformed_command_lines_exit_2(args):
    from sam3_agent_ros.cli import main

    with pytest.raises(SystemExit) as caught:
        main(args)
    assert caught.value.code == 2

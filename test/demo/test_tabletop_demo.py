"""The demo run: its behaviour when the node cannot start or the output directory is taken
(scoring: test_tabletop_scoring.py; the node subprocess: test_node_process.py; the whole run:
test_e2e_demo.py)."""

from __future__ import annotations

import os
import re

import pytest

from sam3_agent_demo import follow_demo, tabletop_demo
from sam3_agent_demo.domains import reserved_loopback_env
from sam3_agent_demo.harness import DemoOptions
from test.demo.test_e2e_demo import REPO_ROOT, run_demo_cli


def _env(**changes: str | None) -> dict[str, str]:
    env = dict(os.environ)
    env.update(reserved_loopback_env())
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), env.get("PYTHONPATH", "")])
    env.pop("_ROS_WHEELS_BOOTSTRAP_COMPLETE", None)
    for name, value in changes.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


@pytest.mark.ros
def test_demo_fails_fast_and_shows_why_when_the_node_cannot_start(tmp_path):
    # No ROS_DOMAIN_ID exported: the demo picks one and prints it.
    process = run_demo_cli(["--out", str(tmp_path), "-p", "llm.backend:=offline",
                            "-p", "segmenter.backend:=no_such_module:factory"],
                           _env(ROS_DOMAIN_ID=None), timeout_s=90)
    assert process.returncode == 1
    assert "the node did not start" in process.stdout
    assert "no_such_module" in process.stdout  # the node log's tail is shown
    assert (tmp_path / "report.json").is_file()
    assert re.search(r"DDS on loopback, ROS_DOMAIN_ID=\d+ \(picked at random; export "
                     r"ROS_DOMAIN_ID to choose it\)", process.stdout), process.stdout


@pytest.mark.parametrize("command", ["demo", "demo-follow"])
def test_demos_refuse_an_exported_domain_id_that_is_not_one(tmp_path, command):
    process = run_demo_cli(["--out", str(tmp_path)], _env(ROS_DOMAIN_ID="robot7"),
                           timeout_s=60, command=command)
    assert process.returncode == 1
    assert "ROS_DOMAIN_ID='robot7' is not a domain id in 0..232" in process.stdout


@pytest.mark.parametrize("run", [tabletop_demo.run_demo, follow_demo.run_follow_demo])
def test_a_second_demo_on_the_same_output_directory_is_refused(tmp_path, run):
    import fcntl
    import io

    with open(tmp_path / ".demo.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        printed = io.StringIO()
        assert run(DemoOptions(out_dir=tmp_path), out=printed) == 1
    assert "another demo is writing to" in printed.getvalue()
    assert not (tmp_path / "report.json").exists()


def test_think_s_reaches_the_node_and_the_wait_for_the_answers():
    """--think-s: the node's offline planner takes that long per call (llm.offline_think_s) and
    the demo waits for the queued answers that long longer; 0 leaves the demo as it was."""
    assert tabletop_demo.node_parameters(0.0) is tabletop_demo.DEMO_PARAMETERS
    rehearsal = tabletop_demo.node_parameters(3.0)
    assert rehearsal["llm"] == {"backend": "offline", "offline_think_s": 3.0}
    assert "offline_think_s" not in tabletop_demo.DEMO_PARAMETERS["llm"]
    assert tabletop_demo.result_timeout_s(None, 0.0, 5) == tabletop_demo.RESULT_TIMEOUT_S
    assert tabletop_demo.result_timeout_s(None, 3.0, 5) == tabletop_demo.RESULT_TIMEOUT_S + 90
    assert tabletop_demo.result_timeout_s(12.0, 3.0, 5) == 12.0  # --result-timeout wins


@pytest.mark.parametrize("value", ["-1", "nan", "601", "soon"])
def test_think_s_refuses_what_is_no_number_of_seconds(value, capsys):
    from sam3_agent_ros.cli import main

    with pytest.raises(SystemExit) as exited:
        main(["demo", "--think-s", value])
    assert exited.value.code == 2
    assert "--think-s" in capsys.readouterr().err

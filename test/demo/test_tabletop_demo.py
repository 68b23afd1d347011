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

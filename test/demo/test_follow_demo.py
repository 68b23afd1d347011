"""End to end: ``sam3-agent demo-follow`` (the node in a subprocess following objects on the
moving and grasp sample bags), in flow mode: every followed query meets IoU >= 0.85 and 3D error
<= 2 cm and ends as the bag says (stopped by a new query, lost when the object leaves, stopped by
stop_follow, lost when the object is taken away beside its look-alike, never switching to it);
overlays and a report are written."""

from __future__ import annotations

import json
import os

import pytest

from sam3_agent_demo.domains import reserved_loopback_env
from test.demo.test_e2e_demo import REPO_ROOT, run_demo_cli

pytestmark = pytest.mark.ros


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(reserved_loopback_env())
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), env.get("PYTHONPATH", "")])
    env.pop("_ROS_WHEELS_BOOTSTRAP_COMPLETE", None)
    return env


def test_demo_follow_scores_every_followed_query(tmp_path):
    env = _env()
    process = run_demo_cli(["--out", str(tmp_path)], env, command="demo-follow")
    assert process.returncode == 0, process.stdout + process.stderr
    assert f"ROS_DOMAIN_ID={env['ROS_DOMAIN_ID']} (exported)" in process.stdout
    assert "deprecated" not in process.stdout + process.stderr
    assert "followed queries correct: 4/4" in process.stdout
    assert "follow-blue: lost at frame stamp" in process.stdout
    assert "follow-green: stopped at frame stamp" in process.stdout
    assert "follow-grasp: lost at frame stamp" in process.stdout
    assert "after the object was taken away" in process.stdout
    assert "backends: llm offline, segmenter color (built-in demo backends" in process.stdout
    report = json.loads((tmp_path / "report.json").read_text())
    by_id = {q["query_id"]: q for q in report["queries"]}
    assert by_id["follow-blue"]["final_state"] == "lost"
    assert by_id["follow-blue"]["mean_iou"] >= 0.85
    assert by_id["follow-blue"]["mean_error_cm"] <= 2.0
    assert by_id["follow-yellow"]["final_reason"] == "new query follow-blue"
    grasp = by_id["follow-grasp"]
    assert grasp["final_state"] == "lost" and grasp["gone"] == "taken away"
    assert 0.0 <= grasp["lost_delay_s"] <= 2.0  # lost_timeout_s + one re-detection period
    assert grasp["max_lookalike_iou"] <= 0.05 and grasp["mean_iou"] >= 0.85
    assert sorted(p.name for p in tmp_path.glob("follow-blue_*.png"))


def test_demo_follow_without_the_sample_says_how_to_make_it(tmp_path):
    process = run_demo_cli(["--out", str(tmp_path / "out"), "--sample", str(tmp_path)], _env(),
                           timeout_s=60, command="demo-follow")
    assert process.returncode == 1
    assert "make it with scripts/make_moving_bag.py" in process.stdout

"""One report type for both demos: counts, verdict, JSON and the backends lines, whatever the
outcomes (the tabletop demo's queries, demo-follow's followed queries)."""

from __future__ import annotations

import json

from sam3_agent_demo.follow_scoring import FollowOutcome
from sam3_agent_demo.report import DemoReport, backends_lines
from sam3_agent_demo.tabletop_scoring import QueryOutcome

OFFLINE = {"llm": "offline", "segmenter": "color"}


def test_counts_and_verdict_over_tabletop_outcomes(tmp_path):
    right = QueryOutcome("a", None, "x", result_count=1, correct=True, backends=OFFLINE)
    wrong = QueryOutcome("b", "id-b", None, result_count=1, problem="expected no_mask")
    silent = QueryOutcome("c", None, "y")
    report = DemoReport(outcomes=[right, wrong, silent], wall_s=1.23456)
    assert (report.answered, report.correct, report.ok) == (2, 1, False)
    written = json.loads(report.write(tmp_path).read_text())
    assert written["answered"] == 2 and written["total"] == 3 and written["wall_s"] == 1.235
    assert written["queries"][1]["query_id"] == "id-b" and written["error"] is None
    assert DemoReport(outcomes=[right]).ok
    assert not DemoReport(outcomes=[right], error="interrupted").ok
    assert not DemoReport().ok  # a run that scored nothing is not a success


def test_follow_outcomes_fill_the_same_report():
    followed = FollowOutcome("f-1", "the yellow object", "yellow_ellipse", "stopped",
                             answer="succeeded", ious=[0.9, 1.0], backends=OFFLINE)
    unanswered = FollowOutcome("f-2", "the green object", "green_prism", "stopped",
                               problems=["the query ended unanswered"])
    report = DemoReport(outcomes=[followed, unanswered])
    assert (report.answered, report.correct, report.ok) == (1, 1, False)
    queries = report.to_json()["queries"]
    assert queries[0]["mean_iou"] == 0.95 and queries[0]["ok"] is True
    assert queries[1]["ok"] is False


def test_backends_lines_once_per_pair_marking_demo_backends():
    outcomes = [QueryOutcome("a", None, None, backends=OFFLINE),
                FollowOutcome("f", "q", "x", "lost", backends=OFFLINE),
                QueryOutcome("b", None, None, backends={"llm": "openai", "segmenter": "sam3"}),
                QueryOutcome("c", None, None)]
    assert backends_lines(outcomes) == [
        "backends: llm offline, segmenter color (built-in demo backends: these answers are not "
        "from a model)", "backends: llm openai, segmenter sam3"]

"""``sam3-agent eval`` / ``eval-compare`` end to end on the shipped sets with the offline backends.

The scores of summary.json are recomputed here from samples.jsonl, the mask PNGs and the truth.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import cv2
import pytest

from sam3_agent_ros.cli import main
from sam3_agent_ros.eval import metrics
from sam3_agent_ros.eval.datasets import load_dataset, load_image, load_truth
from sam3_agent_ros.eval.runner import read_samples_file
from test.fakes.offline_responder import offline_responder
from test.fakes.scripted_server import ScriptedServer
from test.fakes.secret_url import attack_url, closed_port, leaks, leaks_in_files, redacted_url

REPO = Path(__file__).resolve().parents[2]
TABLETOP = REPO / "data" / "eval_tabletop"
REASONSEG = REPO / "data" / "eval_reasonseg_mini"
OFFLINE = ["-p", "llm.backend:=offline", "-p", "segmenter.backend:=color"]
SAMPLE_KEYS = {"id", "query", "status", "error", "iou", "intersection", "union", "rounds",
               "prompt_tokens", "completion_tokens", "latency_s", "mask"}
SUMMARY_KEYS = {"n", "giou", "ciou", "no_target_accuracy", "status_counts", "rounds_mean",
                "prompt_tokens_mean", "latency_p50_s", "latency_p95_s", "config",
                "llm_calls_mean", "giou_by_is_sentence", "samples_per_s"}


def run_eval(*args: str) -> int:
    return main(["eval", *OFFLINE, *args])


@pytest.fixture(scope="module")
def tabletop_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("eval") / "tabletop"
    assert run_eval("--dataset", str(TABLETOP), "--out", str(out), "--jobs", "2") == 0
    return out


def test_whole_shipped_set_scores_match_a_recomputation(tabletop_run):
    summary = json.loads((tabletop_run / "summary.json").read_text())
    rows = read_samples_file(tabletop_run / "samples.jsonl")
    dataset = load_dataset(TABLETOP)
    assert set(summary) >= SUMMARY_KEYS and summary["complete"] is True
    assert summary["n"] == len(rows) == len(dataset.samples)
    assert [r["id"] for r in sorted(rows, key=lambda r: r["id"])] == \
        sorted(s.id for s in dataset.samples)
    by_id = {s.id: s for s in dataset.samples}
    ious, inters, unions = [], [], []
    for row in rows:
        assert set(row) >= SAMPLE_KEYS
        sample = by_id[row["id"]]
        image = load_image(sample)
        truth, ignore = load_truth(sample, image.shape[:2])
        prediction = None
        if row["mask"] is not None:
            png = cv2.imread(str(tabletop_run / row["mask"]), cv2.IMREAD_GRAYSCALE)
            assert set(png.ravel().tolist()) <= {0, 255}
            prediction = png == 255
        assert (row["mask"] is not None) == (row["status"] == "succeeded")
        inter, union = metrics.overlap(prediction, truth, ignore)
        assert (inter, union) == (row["intersection"], row["union"]), row["id"]
        ious.append(inter / union if union else 1.0)
        inters.append(inter)
        unions.append(union)
    assert summary["giou"] == pytest.approx(sum(ious) / len(ious), abs=1e-6)
    assert summary["ciou"] == pytest.approx(sum(inters) / sum(unions), abs=1e-6)
    absent = [r for r in rows if not by_id[r["id"]].mask and not by_id[r["id"]].shapes]
    assert summary["no_target_accuracy"] == pytest.approx(
        sum(r["status"] == "no_mask" for r in absent) / len(absent), abs=1e-6)
    assert sum(summary["status_counts"].values()) == len(rows)
    assert summary["config"]["llm.backend"] == "offline"
    assert summary["backends"] == {"llm": "offline", "segmenter": "color"}
    # The offline backends are no perception model: some failures are expected, not zero score.
    assert 0.3 < summary["giou"] < 1.0


def test_report_draws_the_worst_samples(tabletop_run):
    report = (tabletop_run / "report.md").read_text()
    assert "| gIoU |" in report and "worst samples" in report
    assert "DEMO BACKENDS (llm.backend=offline, segmenter.backend=color)" in report
    pictures = [line.split("](")[1].rstrip(")") for line in report.splitlines()
                if line.startswith("![")]
    assert len(pictures) == 8
    assert all((tabletop_run / p).is_file() for p in pictures)


def test_reasonseg_layout_end_to_end(tmp_path):
    assert run_eval("--dataset", str(REASONSEG), "--out", str(tmp_path)) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    rows = read_samples_file(tmp_path / "samples.jsonl")
    assert summary["dataset"]["layout"] == "reasonseg"
    assert summary["n"] == len(load_dataset(REASONSEG).samples) == len(rows)
    assert all("#" in r["id"] for r in rows)
    assert set(summary["giou_by_is_sentence"]) == {"sentence", "phrase"}
    for row in rows:
        if row["mask"]:
            assert (tmp_path / row["mask"]).is_file()


def test_limit_then_resume_runs_each_sample_once(tmp_path, capsys):
    assert run_eval("--dataset", str(TABLETOP), "--out", str(tmp_path), "--limit", "5") == 0
    assert len(read_samples_file(tmp_path / "samples.jsonl")) == 5
    # A line cut short by a kill is dropped on resume.
    with (tmp_path / "samples.jsonl").open("a") as handle:
        handle.write('{"id": "scene0')
    assert run_eval("--dataset", str(TABLETOP), "--out", str(tmp_path), "--limit", "8",
                    "--resume", "-p", "agent.max_rounds:=12") == 0
    err = capsys.readouterr().err
    assert "5 already done" in err and "different parameters" in err
    rows = read_samples_file(tmp_path / "samples.jsonl")
    ids = [r["id"] for r in rows]
    assert len(ids) == len(set(ids)) == 8
    assert json.loads((tmp_path / "summary.json").read_text())["n"] == 8


def test_resume_with_the_same_parameters_does_not_warn(tmp_path, capsys):
    """Issue 25: the stored summary holds JSON (lists), the config tuples: every resume warned
    that concepts.prompts changed although nothing did."""
    args = ("--dataset", str(TABLETOP), "--out", str(tmp_path))
    assert run_eval(*args, "--limit", "2") == 0
    capsys.readouterr()
    assert run_eval(*args, "--limit", "3", "--resume") == 0
    err = capsys.readouterr().err
    assert "2 already done" in err and "different parameters" not in err, err


def test_resume_warns_of_a_real_change_and_names_only_it(tmp_path, capsys):
    args = ("--dataset", str(TABLETOP), "--out", str(tmp_path))
    assert run_eval(*args, "--limit", "2") == 0
    capsys.readouterr()
    assert run_eval(*args, "--limit", "3", "--resume", "-p", "agent.max_rounds:=7") == 0
    warning = [line for line in capsys.readouterr().err.splitlines()
               if "different parameters" in line]
    assert len(warning) == 1 and warning[0].endswith(": agent.max_rounds"), warning


def test_existing_output_needs_resume(tmp_path, capsys):
    assert run_eval("--dataset", str(TABLETOP), "--out", str(tmp_path), "--limit", "1") == 0
    assert run_eval("--dataset", str(TABLETOP), "--out", str(tmp_path), "--limit", "1") == 2
    assert "add --resume" in capsys.readouterr().err


@pytest.mark.parametrize("args, message", [
    (["--dataset", "/nonexistent/set"], "no such directory"),
    (["--dataset", str(REPO / "docs")], "unknown layout"),
    (["--dataset", str(TABLETOP), "--jobs", "0"], "--jobs and --limit must be >= 1"),
    (["--dataset", str(TABLETOP), "--resume"], "--resume needs --out"),
    (["--dataset", str(TABLETOP), "-p", "agent.max_rounds:=0"], "agent.max_rounds"),
])
def test_bad_usage_is_exit_2_with_one_clear_line(tmp_path, capsys, args, message):
    out = [] if "--resume" in args else ["--out", str(tmp_path / "o")]
    assert run_eval(*args, *out) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]


def test_missing_image_is_a_failed_sample_not_a_crash(tmp_path):
    data = tmp_path / "set"
    data.mkdir()
    image = cv2.imread(str(TABLETOP / "images" / "scene000.jpg"))
    cv2.imwrite(str(data / "ok.png"), image)
    lines = [{"id": "good", "image": "ok.png", "query": "the purple unicorn"},
             {"id": "gone", "image": "missing.png", "query": "the red box"}]
    (data / "annotations.jsonl").write_text("\n".join(json.dumps(x) for x in lines))
    assert run_eval("--dataset", str(data), "--out", str(tmp_path / "o")) == 0
    rows = {r["id"]: r for r in read_samples_file(tmp_path / "o" / "samples.jsonl")}
    assert rows["gone"]["status"] == "failed" and "no such file" in rows["gone"]["error"]
    assert rows["good"]["status"] == "no_mask" and rows["good"]["iou"] == 1.0
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert summary["giou"] == 0.5 and summary["no_target_accuracy"] == 0.5


def _set_with_an_outside_sample(tmp_path: Path) -> Path:
    """Two samples inside and one whose image is a symlink to a picture beside the set (what a
    downloaded archive can hold); its truth makes it a sure worst sample when it runs."""
    data = tmp_path / "set"
    data.mkdir()
    image = cv2.imread(str(TABLETOP / "images" / "scene000.jpg"))
    cv2.imwrite(str(data / "ok.png"), image)
    cv2.imwrite(str(tmp_path / "private.png"), image)
    (data / "linked.png").symlink_to(tmp_path / "private.png")
    corner = [[[0, 0], [60, 0], [60, 60], [0, 60]]]
    lines = [{"id": "good", "image": "ok.png", "query": "the purple unicorn"},
             {"id": "good2", "image": "ok.png", "query": "the pink can"},
             {"id": "out", "image": "linked.png", "query": "the pink can", "polygons": corner}]
    (data / "annotations.jsonl").write_text("\n".join(json.dumps(x) for x in lines))
    return data


def test_a_sample_outside_the_set_is_refused_not_drawn_and_the_others_go_on(tmp_path):
    """Issue 17 item 9: eval read ../x.png, absolute paths, symlinks out, and copied them into
    worst/."""
    data = _set_with_an_outside_sample(tmp_path)
    out = tmp_path / "refused"
    assert run_eval("--dataset", str(data), "--out", str(out)) == 0
    rows = {r["id"]: r for r in read_samples_file(out / "samples.jsonl")}
    assert rows["out"]["refused"] is True and rows["out"]["status"] == "failed"
    assert rows["out"]["error"].startswith("refused: image ")
    assert "outside the dataset folder" in rows["out"]["error"]
    assert rows["out"]["llm_calls"] == 0 and rows["out"]["mask"] is None
    assert rows["good"]["status"] == "no_mask" and "refused" not in rows["good"]
    assert rows["good2"]["status"] == "succeeded"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status_counts"]["failed: refused"] == 1 and summary["n"] == 3
    report = (out / "report.md").read_text()
    assert "![out]" not in report
    assert [p.name for p in (out / "worst").iterdir()] and not list(out.glob("worst/out*"))

    allowed = tmp_path / "allowed"  # the same run reading it draws it: the check can fail
    assert run_eval("--dataset", str(data), "--out", str(allowed), "--allow-outside-paths") == 0
    assert "![out]" in (allowed / "report.md").read_text()
    assert list(allowed.glob("worst/out*"))


def test_url_credentials_are_in_no_eval_output(tmp_path, capsys):
    """Issue 17 item 8: llm.base_url=http://user:pass@host/v1?api-key=K appeared in
    samples.jsonl, report.md and summary.json. Issue 25: such a URL is refused before anything
    runs (exit 2, one line saying where the key goes); nothing is written."""
    host_port = closed_port()
    out = tmp_path / "run"
    status = main(["eval", "--dataset", str(TABLETOP), "--out", str(out), "--limit", "2",
                   "-p", "llm.backend:=openai", "-p", f"llm.base_url:={attack_url(host_port)}",
                   "-p", "llm.max_retries:=0", "-p", "llm.api_key_env:=",
                   "-p", "segmenter.backend:=color"])
    assert status == 2
    err = capsys.readouterr().err
    assert leaks(err) == [] and f"llm.base_url {redacted_url(host_port)} carries credentials" \
        in err
    assert not out.exists() or leaks_in_files(out) == {}


def test_eval_compare(tabletop_run, tmp_path, capsys):
    other = tmp_path / "b"
    # A different run on the first 20 samples: offline planner, but no verifier round.
    assert run_eval("--dataset", str(TABLETOP), "--out", str(other), "--limit", "20",
                    "-p", "agent.max_rounds:=2") == 0
    capsys.readouterr()
    assert main(["eval-compare", str(tabletop_run), str(other), "--top", "3"]) == 0
    out = capsys.readouterr().out
    assert "giou" in out and "ciou" in out
    assert "agent.max_rounds: 16 -> 2" in out
    assert "common samples: 20 (only in A: 80, only in B: 0)" in out
    assert "largest IoU changes (3 shown)" in out


def test_eval_compare_without_a_run(tmp_path, capsys):
    assert main(["eval-compare", str(tmp_path), str(tmp_path)]) == 2
    assert "no readable summary.json" in capsys.readouterr().err


def test_ctrl_c_writes_what_finished_and_resume_completes(tmp_path):
    """A real SIGINT to the command: exit 130, finished samples and a summary on disk, and
    --resume answers exactly the rest."""
    out = tmp_path / "run"
    with ScriptedServer(responder=offline_responder(delay_s=0.2)) as server:
        command = [sys.executable, "-m", "sam3_agent_ros.cli", "eval", "--dataset", str(TABLETOP),
                   "--limit", "12", "--jobs", "2", "--out", str(out),
                   "-p", "llm.backend:=openai", "-p", f"llm.base_url:={server.base_url}",
                   "-p", "segmenter.backend:=color"]
        process = subprocess.Popen(command, cwd=REPO, stderr=subprocess.PIPE, text=True,
                                   stdout=subprocess.DEVNULL, env={**os.environ,
                                                                   "OPENAI_API_KEY": "x"})
        samples = out / "samples.jsonl"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and process.poll() is None and not (
                samples.is_file() and samples.read_text().count("\n") >= 2):
            time.sleep(0.05)
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=60)
        assert process.returncode == 130, err
        assert "interrupted" in err and "--resume" in err
        first = read_samples_file(samples)
        summary = json.loads((out / "summary.json").read_text())
        assert 2 <= len(first) < 12 and summary["n"] == len(first)
        assert summary["complete"] is False
        assert all(r["status"] != "cancelled" for r in first)
        resumed = subprocess.run([*command, "--resume"], cwd=REPO, capture_output=True,
                                 text=True, timeout=300, env={**os.environ,
                                                              "OPENAI_API_KEY": "x"})
        assert resumed.returncode == 0, resumed.stderr
    rows = read_samples_file(samples)
    assert sorted(r["id"] for r in rows) == sorted(s.id for s in
                                                   load_dataset(TABLETOP).samples[:12])
    assert json.loads((out / "summary.json").read_text())["complete"] is True


def test_offline_flag_runs_the_demo_backends_and_says_so(tmp_path, caplog):
    assert main(["eval", "--offline", "--dataset", str(TABLETOP), "--limit", "2",
                 "--out", str(tmp_path)]) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["backends"] == {"llm": "offline", "segmenter": "color"}
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert any(m.startswith("DEMO BACKENDS") for m in warnings), warnings


def test_offline_flag_against_a_contradicting_override_is_a_usage_error(tmp_path, capsys):
    assert main(["eval", "--offline", "-p", "llm.backend:=openai", "--dataset", str(TABLETOP),
                 "--out", str(tmp_path)]) == 2
    assert "--offline sets llm.backend:=offline" in capsys.readouterr().err


def test_a_missing_api_key_fails_before_anything_runs(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    out = tmp_path / "run"
    assert main(["eval", "--dataset", str(TABLETOP), "--out", str(out),
                 "-p", "segmenter.backend:=color"]) == 2
    err = capsys.readouterr().err
    assert "OPENAI_API_KEY" in err and err.strip().endswith("to try without a model: add --offline")
    assert not out.exists()


def test_backends_that_cannot_be_built_exit_1_with_the_reason(tmp_path, capsys):
    status = main(["eval", "--dataset", str(TABLETOP), "--out", str(tmp_path), "-p",
                   "llm.backend:=offline", "-p", "segmenter.backend:=no_such_module:factory"])
    assert status == 1
    assert "cannot build the backends" in capsys.readouterr().err

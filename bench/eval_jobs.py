"""``sam3-agent eval --jobs 8`` vs ``--jobs 1`` on the same 40 samples, 1 s per LLM reply.

The real command (``sam3_agent_ros.cli.main``, in this process) evaluates the first ``--samples``
samples of data/eval_tabletop with ``llm.backend: openai`` against the scripted
OpenAI-compatible server on 127.0.0.1 (test/fakes/scripted_server.py), which answers every
request (main loop and verifier) like the offline planner after ``--delay`` seconds
(test/fakes/offline_responder.py); the colour segmenter segments. Real OpenAI client, HTTP,
JPEG encoding, scoring and output files included. Both runs must give the same per-sample
scores; the figure is the ratio of their wall times.

Run alone: ``.venv/bin/python bench/eval_jobs.py [--samples 40] [--delay 1.0] [--jobs 8]``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import tempfile
import time
from pathlib import Path

from common import ROOT, command_line, write_result

from sam3_agent_ros.cli import main as cli_main  # noqa: E402  (after common puts ROOT on sys.path)
from sam3_agent_ros.eval.runner import read_samples_file  # noqa: E402
from test.fakes.offline_responder import offline_responder  # noqa: E402
from test.fakes.scripted_server import ScriptedServer  # noqa: E402

DATASET = ROOT / "data" / "eval_tabletop"


def run_eval(base_url: str, samples: int, jobs: int, out: Path) -> dict:
    args = ["eval", "--dataset", str(DATASET), "--limit", str(samples), "--jobs", str(jobs),
            "--out", str(out), "-p", "llm.backend:=openai", "-p", f"llm.base_url:={base_url}",
            "-p", "segmenter.backend:=color", "-p", "llm.timeout_s:=30",
            "-p", "llm.api_key_env:="]  # the scripted server needs no key
    started = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        status = cli_main(args)
    wall_s = time.perf_counter() - started
    if status != 0:
        raise RuntimeError(f"sam3-agent eval --jobs {jobs} exited {status}")
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    rows = {r["id"]: (r["status"], r["iou"]) for r in read_samples_file(out / "samples.jsonl")}
    return {"jobs": jobs, "wall_s": round(wall_s, 2), "summary": summary, "rows": rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--samples", type=int, default=40)
    parser.add_argument("--delay", type=float, default=1.0, help="seconds per LLM reply")
    parser.add_argument("--jobs", type=int, default=8)
    args = parser.parse_args(argv)
    runs = []
    with ScriptedServer(responder=offline_responder(args.delay)) as server, \
            tempfile.TemporaryDirectory(prefix="eval_jobs_") as tmp:
        for jobs in (1, args.jobs):
            run = run_eval(server.base_url, args.samples, jobs, Path(tmp) / f"jobs{jobs}")
            requests = len(server.requests)
            run["requests_total_so_far"] = requests
            runs.append(run)
            print(f"--jobs {jobs}: {run['wall_s']:.1f} s for {args.samples} samples "
                  f"({args.samples / run['wall_s']:.2f} samples/s)", flush=True)
        server.assert_clean(all_consumed=False)
    one, many = runs
    if one["rows"] != many["rows"]:
        raise RuntimeError("--jobs 1 and --jobs N scored the samples differently")
    s = one["summary"]
    data = {
        "command": command_line(), "samples": args.samples, "delay_s": args.delay,
        "jobs": args.jobs, "jobs1_wall_s": one["wall_s"], "jobsN_wall_s": many["wall_s"],
        "speedup": round(one["wall_s"] / many["wall_s"], 2),
        "llm_calls_mean": s["llm_calls_mean"], "rounds_mean": s["rounds_mean"],
        "llm_requests": one["requests_total_so_far"], "giou": s["giou"], "ciou": s["ciou"],
        "same_scores": True,
    }
    path = write_result("eval_jobs", data)
    print(f"--jobs {args.jobs} vs --jobs 1: {data['speedup']:.2f}x faster "
          f"({data['jobsN_wall_s']:.1f} s vs {data['jobs1_wall_s']:.1f} s; "
          f"{data['llm_calls_mean']:.2f} LLM calls per sample, {args.delay:g} s each); "
          f"same scores (gIoU {s['giou']:.3f}); wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

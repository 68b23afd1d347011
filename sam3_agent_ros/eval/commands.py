"""``sam3-agent eval`` and ``sam3-agent eval-compare``: argparse registration and handlers.

Exit status: 0 when the evaluation ran (whatever the scores), 1 when the backends could not be
built or the output could not be written, 2 for bad usage (missing dataset, unknown layout, bad
parameter, a backend lacking its endpoint, API key or SAM 3 checkpoint, an output folder that
already holds a run without ``--resume``), 130 when interrupted
(everything finished so far is written; ``--resume`` continues).
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
from pathlib import Path

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


def register(subparsers) -> None:
    """Add ``eval`` and ``eval-compare`` to the ``sam3-agent`` sub-command parsers."""
    from sam3_agent_ros.inputs import add_config_arguments

    run = subparsers.add_parser(
        "eval", help="measure gIoU/cIoU on a labelled set (ReasonSeg or annotations.jsonl)",
        description="Answer every query of a labelled set and score the masks (gIoU, cIoU, "
                    "no-target accuracy, rounds, tokens, latency). See docs/eval.md.")
    run.add_argument("--dataset", required=True,
                     help="folder: ReasonSeg files (<stem>.jpg + <stem>.json) or "
                          "annotations.jsonl")
    add_config_arguments(run)
    run.add_argument("--jobs", type=int, default=1, help="queries answered at once (default 1)")
    run.add_argument("--limit", type=int, help="only the first N samples")
    run.add_argument("--out", help="output folder (default out/eval/<dataset>-<timestamp>)")
    run.add_argument("--resume", action="store_true",
                     help="continue the run in --out: skip the samples in its samples.jsonl")
    run.add_argument("--first-query", action="store_true",
                     help="ReasonSeg: only the first query of each image, as LISA's validation "
                          "scores it")
    run.add_argument("--worst", type=int, default=8,
                     help="worst samples drawn in report.md (default 8)")
    run.add_argument("--allow-outside-paths", action="store_true",
                     help="read image and mask paths that resolve (symlinks followed) outside "
                          "the dataset folder; by default such samples are refused")
    run.set_defaults(handler=cmd_eval)

    compare = subparsers.add_parser(
        "eval-compare", help="two eval outputs side by side, and the samples that changed most",
        description="Print the summaries of two 'sam3-agent eval' outputs side by side and the "
                    "samples whose IoU changed most.")
    compare.add_argument("a", metavar="OUT_A", help="output folder of the first run")
    compare.add_argument("b", metavar="OUT_B", help="output folder of the second run")
    compare.add_argument("--top", type=int, default=10, help="changed samples to list")
    compare.set_defaults(handler=cmd_eval_compare)


def _error(message: str) -> None:
    from sam3_agent_ros.redact import redact_text

    print(f"sam3-agent eval: {redact_text(message)}", file=sys.stderr)


def cmd_eval(args: argparse.Namespace) -> int:
    from sam3_agent_ros.config import ConfigError
    from sam3_agent_ros.eval.datasets import DatasetError, first_queries, load_dataset
    from sam3_agent_ros.eval.runner import SAMPLES, read_samples_file
    from sam3_agent_ros.inputs import check_backends, load_config

    if args.jobs < 1 or (args.limit is not None and args.limit < 1) or args.worst < 0:
        _error("--jobs and --limit must be >= 1, --worst >= 0")
        return EXIT_USAGE
    if args.resume and not args.out:
        _error("--resume needs --out, the folder of the run to continue")
        return EXIT_USAGE
    try:
        dataset = load_dataset(args.dataset, allow_outside_paths=args.allow_outside_paths)
        samples = first_queries(dataset) if args.first_query else dataset.samples
        config = load_config(args.params_file, args.overrides, args.offline)
    except (DatasetError, ConfigError) as exc:
        _error(str(exc))
        return EXIT_USAGE
    if not check_backends(config, "eval"):
        return EXIT_USAGE
    out = Path(args.out) if args.out else \
        Path("out/eval") / f"{dataset.name}-{time.strftime('%Y%m%d-%H%M%S')}"
    samples_file = out / SAMPLES
    if samples_file.exists() and not args.resume:
        _error(f"{samples_file} exists: add --resume to continue that run, or choose another "
               "--out")
        return EXIT_USAGE
    try:
        out.mkdir(parents=True, exist_ok=True)
        done = read_samples_file(samples_file)
        if args.resume:  # rewrite without a line cut short by a kill
            samples_file.write_text("".join(_json_line(r) for r in done), encoding="utf-8")
    except OSError as exc:
        _error(f"cannot use --out {out}: {exc}")
        return EXIT_USAGE
    if args.resume:
        _warn_if_config_changed(out, config)
    selected = samples[:args.limit] if args.limit else samples
    done_ids = {r["id"] for r in done}
    todo = [s for s in selected if s.id not in done_ids]
    print(f"[eval] {dataset.name} ({dataset.layout}): {len(selected)} samples, "
          f"{len(selected) - len(todo)} already done, {args.jobs} job(s) -> {out}",
          file=sys.stderr)
    try:
        ran = _run(config, out, args.jobs, todo, done, selected)
        if ran is None:
            return EXIT_FAILED
        interrupted, new, wall_s = ran
        summary = _write_outputs(out, dataset, config, args.jobs, wall_s, len(new), selected,
                                 worst=0 if interrupted else args.worst)
    except OSError as exc:
        _error(f"cannot write the output: {exc}")
        return EXIT_FAILED
    if interrupted:
        _error(f"interrupted: {summary['n']} samples written to {out}; continue with "
               f"--resume --out {out}")
        return EXIT_INTERRUPTED
    figures = ", ".join(f"{k} {_short(summary.get(k))}" for k in
                        ("n", "giou", "ciou", "no_target_accuracy", "samples_per_s"))
    print(f"{figures} -> {out / 'summary.json'}")
    return EXIT_OK


def _run(config, out: Path, jobs: int, todo, done, selected):
    """(interrupted, new records, wall seconds), or None when the backends cannot be built."""
    from sam3_agent_ros.backends import close_quietly, make_llm, make_segmenter
    from sam3_agent_ros.core.agent import Agent
    from sam3_agent_ros.core.prompts import load_prompts
    from sam3_agent_ros.eval.runner import EvalRunner, ProgressBar, SerialSegmenter

    try:
        llm = make_llm(config)
        segmenter = SerialSegmenter(make_segmenter(config))
        prompts = load_prompts(config.agent.prompts_dir)
    except Exception as exc:  # backend construction: a clear reason, no traceback
        _error(f"cannot build the backends: {type(exc).__name__}: {exc}")
        return None
    selected_ids = {s.id for s in selected}
    progress = ProgressBar(len(selected), [r for r in done if r["id"] in selected_ids])
    stop = threading.Event()
    restore = _stop_on_signals(stop)
    runner = EvalRunner(lambda: Agent(config, llm=llm, segmenter=segmenter, prompts=prompts),
                        out, jobs, stop=stop, on_row=progress.update)
    started = time.monotonic()
    try:
        new = runner.run(todo)
    finally:
        wall_s = time.monotonic() - started
        progress.finish()
        restore()
        close_quietly(llm)
        close_quietly(segmenter)
    return stop.is_set(), new, wall_s


def _write_outputs(out: Path, dataset, config, jobs: int, wall_s: float, new_samples: int,
                   selected, worst: int) -> dict:
    from sam3_agent_ros.eval.report import build_summary, write_report, write_summary
    from sam3_agent_ros.eval.runner import SAMPLES, read_samples_file

    rows = read_samples_file(out / SAMPLES)
    complete = {s.id for s in selected} <= {r["id"] for r in rows}
    summary = build_summary(rows, dataset, config.to_params(), jobs=jobs, wall_s=wall_s,
                            new_samples=new_samples, complete=complete)
    write_summary(out, summary)
    write_report(out, summary, rows, dataset, worst=worst)
    return summary


def _warn_if_config_changed(out: Path, config) -> None:
    from sam3_agent_ros.eval.report import SUMMARY, public_config

    try:
        previous = json.loads((out / SUMMARY).read_text(encoding="utf-8")).get("config", {})
    except (OSError, ValueError, AttributeError):
        return
    # Compared as stored: summary.json holds JSON, where the config's tuples are lists (every
    # resume warned that concepts.prompts, an empty tuple, had changed).
    now = json.loads(json.dumps(public_config(config.to_params())))
    changed = sorted(k for k in set(previous) | set(now) if previous.get(k) != now.get(k))
    if changed:
        _error(f"warning: resuming with different parameters than the first part of the run: "
               f"{', '.join(changed)}")


def _stop_on_signals(stop: threading.Event):
    """Ctrl-C / SIGTERM set ``stop`` (the queries in flight are cancelled); returns a restorer."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    for sig in previous:
        signal.signal(sig, lambda *_: stop.set())

    def restore() -> None:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return restore


def _json_line(row: dict) -> str:
    from sam3_agent_ros.redact import redact_value

    return json.dumps(redact_value(row)) + "\n"


def _short(value) -> str:
    return f"{value:.4f}" if isinstance(value, float) else str(value)


def cmd_eval_compare(args: argparse.Namespace) -> int:
    from sam3_agent_ros.eval.compare import CompareError, compare, load_run
    from sam3_agent_ros.redact import redact_text

    try:
        a, b = load_run(args.a), load_run(args.b)
    except CompareError as exc:
        print(f"sam3-agent eval-compare: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(f"A = {args.a}\nB = {args.b}\n")
    sys.stdout.write(redact_text(compare(a, b, top=args.top)))  # runs written before redaction
    return EXIT_OK

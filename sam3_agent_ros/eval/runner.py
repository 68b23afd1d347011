"""Run the samples of a dataset through the agent, ``jobs`` at a time, and record each result.

One worker thread per job, each with its own ``Agent`` (an Agent runs one query at a time) over
the shared LLM client (requests run concurrently: a vLLM server batches them) and one shared
segmenter behind a lock (one GPU model). Every finished sample is appended to ``samples.jsonl``
at once (its mask PNG first), so a stop at any moment loses only the queries in flight.
``stop`` (set by Ctrl-C / SIGTERM) cancels the queries in flight; cancelled samples are not
recorded, so ``--resume`` runs them again.
"""

from __future__ import annotations

import json
import re
import sys
import threading
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from sam3_agent_ros.core.agent import Agent
from sam3_agent_ros.core.cancel import CancelToken
from sam3_agent_ros.core.types import Frame, Query, QueryStatus
from sam3_agent_ros.eval import metrics
from sam3_agent_ros.eval.datasets import Sample, SampleError, load_image, load_truth
from sam3_agent_ros.redact import redact_value

SAMPLES = "samples.jsonl"
MASKS = "masks"


class SerialSegmenter:
    """A segmenter whose ``segment`` calls run one at a time (one model, many workers)."""

    def __init__(self, segmenter):
        self._segmenter = segmenter
        self._lock = threading.Lock()

    def segment(self, image, text_prompt):
        with self._lock:
            return self._segmenter.segment(image, text_prompt)

    def __getattr__(self, name):  # close, ...
        return getattr(self._segmenter, name)


def mask_filename(sample_id: str) -> str:
    """A file name for a sample id (ReasonSeg ids hold '#'); distinct ids give distinct names."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", sample_id).strip("._") or "sample"
    if safe != sample_id:
        safe = f"{safe}-{zlib.crc32(sample_id.encode('utf-8')):08x}"
    return f"{safe}.png"


def read_samples_file(path: Path) -> list[dict]:
    """The records of a ``samples.jsonl``; a line cut short by a kill is dropped."""
    if not path.is_file():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict) and isinstance(row.get("id"), str):
            rows.append(row)
    return rows


def evaluate_sample(agent: Agent, sample: Sample, cancel: CancelToken,
                    out_dir: Path) -> dict:
    """Answer one sample and score it; never raises (an unreadable sample is a failed row, a
    refused one too, marked ``"refused": true``: none of its files is read)."""
    row: dict[str, Any] = {
        "id": sample.id, "query": sample.query, "status": "failed", "error": None,
        "iou": 0.0, "intersection": None, "union": None, "rounds": 0, "llm_calls": 0,
        "prompt_tokens": 0, "completion_tokens": 0, "latency_s": None, "mask": None,
        "absent": sample.absent, "is_sentence": sample.is_sentence, "text_prompts": []}
    if sample.refused:  # a miss like an unreadable sample; unknown truth: not counted as absent
        row.update(error=f"refused: {sample.refused}", refused=True, absent=None)
        return row
    try:
        image = load_image(sample, agent.config.node.max_image_pixels)
        truth, ignore = load_truth(sample, image.shape[:2])
    except SampleError as exc:
        row["error"] = str(exc)  # scored IoU 0 (a miss), left out of cIoU: its union is unknown
        return row
    row["absent"] = not truth.any()  # also for an all-zero mask or only ignore regions
    result = agent.run(Frame(image, frame_id=sample.id), Query(sample.id, sample.query),
                       cancel=cancel)
    prediction = None
    if result.masks:
        prediction = np.zeros(truth.shape, bool)
        for mask in result.masks:
            prediction |= mask.mask
        name = f"{MASKS}/{mask_filename(sample.id)}"
        if not cv2.imwrite(str(out_dir / name), prediction.astype(np.uint8) * 255):
            raise OSError(f"cannot write {out_dir / name}")
        row["mask"] = name
    intersection, union = metrics.overlap(prediction, truth, ignore)
    row.update(status=result.status.value, error=result.error,
               iou=round(metrics.iou(intersection, union), 6), intersection=intersection,
               union=union, rounds=result.rounds, llm_calls=result.usage.llm_calls,
               prompt_tokens=result.usage.prompt_tokens,
               completion_tokens=result.usage.completion_tokens,
               latency_s=round(result.timings.total_s, 4), text_prompts=result.text_prompts)
    return row


class EvalRunner:
    """``run(samples)`` answers the samples with ``jobs`` workers and appends their records."""

    def __init__(self, make_agent: Callable[[], Agent], out_dir: Path, jobs: int,
                 stop: threading.Event | None = None,
                 on_row: Callable[[dict], None] | None = None):
        self.make_agent, self.out_dir, self.jobs = make_agent, out_dir, jobs
        self.stop = stop or threading.Event()
        self.on_row = on_row
        self._lock = threading.Lock()
        self._in_flight: set[CancelToken] = set()
        self._errors: list[BaseException] = []

    def run(self, samples: list[Sample]) -> list[dict]:
        """The new records, in completion order. Returns early (what finished is kept) once
        ``stop`` is set."""
        (self.out_dir / MASKS).mkdir(parents=True, exist_ok=True)
        pending = iter(list(samples))
        rows: list[dict] = []
        agents = [self.make_agent() for _ in range(min(self.jobs, len(samples)))]
        threads = [threading.Thread(target=self._work, args=(agent, pending, rows),
                                    name=f"eval-worker-{i}", daemon=True)
                   for i, agent in enumerate(agents)]
        for thread in threads:
            thread.start()
        cancelled = False
        for thread in threads:
            while thread.is_alive():  # join in slices: the main thread stays free for signals
                thread.join(0.1)
                if self.stop.is_set() and not cancelled:
                    cancelled = True
                    with self._lock:
                        for token in self._in_flight:
                            token.cancel("evaluation interrupted")
        if self._errors:
            raise self._errors[0]
        return rows

    def _work(self, agent: Agent, pending, rows: list[dict]) -> None:
        samples_file = self.out_dir / SAMPLES
        while not self.stop.is_set():
            with self._lock:
                sample = next(pending, None)
                if sample is None:
                    return
                token = CancelToken()
                self._in_flight.add(token)
            try:
                row = evaluate_sample(agent, sample, token, self.out_dir)
            except BaseException as exc:  # an output we cannot write: stop everything
                with self._lock:
                    self._errors.append(exc)
                self.stop.set()
                return
            finally:
                with self._lock:
                    self._in_flight.discard(token)
            if row["status"] == QueryStatus.CANCELLED.value and self.stop.is_set():
                continue  # interrupted, not answered: --resume runs it again
            with self._lock:
                with samples_file.open("a", encoding="utf-8") as handle:
                    handle.write(json.dumps(redact_value(row)) + "\n")
                rows.append(row)
                if self.on_row is not None:
                    self.on_row(row)


class ProgressBar:
    """Samples done, running gIoU, rate and ETA on stderr: one line redrawn with ``\\r`` on a
    terminal, a line every tenth of the run otherwise (logs)."""

    def __init__(self, total: int, done_rows: list[dict], stream=None):
        self.stream = stream or sys.stderr
        self.total, self.rows = total, list(done_rows)
        self.started, self.new = time.monotonic(), 0
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.every = max(1, total // 10)

    def update(self, row: dict) -> None:
        self.rows.append(row)
        self.new += 1
        if self.tty:
            self.stream.write("\r" + self.line())
            self.stream.flush()
        elif self.new % self.every == 0 or len(self.rows) == self.total:
            self.stream.write(self.line() + "\n")
            self.stream.flush()

    def line(self) -> str:
        elapsed = time.monotonic() - self.started
        rate = self.new / elapsed if elapsed > 0 else 0.0
        left = max(0, self.total - len(self.rows))
        eta = f"{left / rate:.0f} s" if rate > 0 else "?"
        running = metrics.giou([r["iou"] for r in self.rows if r.get("iou") is not None])
        shown = f"{running:.3f}" if running is not None else "-"
        return (f"[eval] {len(self.rows)}/{self.total} gIoU {shown} {rate:.2f} samples/s "
                f"ETA {eta}   ")

    def finish(self) -> None:
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()

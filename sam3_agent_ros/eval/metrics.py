"""The scores, by the standard ReasonSeg definitions (as LISA computes them); pure functions.

- per sample: intersection and union of the predicted union mask with the truth, pixels of the
  ignore region left out of both; IoU = intersection / union, and 1.0 when both are empty (an
  empty prediction on an absent object is right, on a present one it scores 0.0);
- **gIoU** = mean of the per-sample IoUs; **cIoU** = sum of intersections / sum of unions
  (``None`` when every union is 0: nothing to measure);
- **no-target accuracy** = share of absent-object samples answered ``no_mask`` (a failed query
  is not an answer, even though its empty prediction scores IoU 1.0).

``summarize`` turns the per-sample records of ``samples.jsonl`` into ``summary.json``'s figures,
so the same numbers can be recomputed from the files.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np


def overlap(prediction: np.ndarray | None, truth: np.ndarray,
            ignore: np.ndarray | None = None) -> tuple[int, int]:
    """(intersection, union) pixel counts; ``prediction`` None = nothing selected."""
    truth = np.asarray(truth, bool)
    pred = np.zeros_like(truth) if prediction is None else np.asarray(prediction, bool)
    if pred.shape != truth.shape:
        raise ValueError(f"prediction {pred.shape} and truth {truth.shape} differ in shape")
    if ignore is not None:
        keep = ~np.asarray(ignore, bool)
        pred, truth = pred & keep, truth & keep
    return int(np.count_nonzero(pred & truth)), int(np.count_nonzero(pred | truth))


def iou(intersection: int, union: int) -> float:
    return 1.0 if union == 0 else intersection / union


def giou(ious: Sequence[float]) -> float | None:
    return float(sum(ious) / len(ious)) if ious else None


def ciou(intersections: Iterable[int], unions: Iterable[int]) -> float | None:
    total_union = sum(unions)
    return float(sum(intersections) / total_union) if total_union else None


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear-interpolated percentile (numpy's default); None for no values."""
    return float(np.percentile(np.asarray(values, float), q)) if values else None


def status_key(status: str, error: str | None) -> str:
    """``succeeded``, ``no_mask``, or ``failed: <reason kind>``: the reason up to its first
    colon, numbers written ``N``, so that e.g. every timeout counts as one kind."""
    if status != "failed" or not error:
        return status
    kind = re.sub(r"\d+(\.\d+)?", "N", error.split(":", 1)[0]).strip()
    return f"{status}: {kind[:60]}"


def summarize(rows: Sequence[dict]) -> dict:
    """The figures of ``summary.json`` from the per-sample records (``samples.jsonl`` lines)."""
    scored = [r for r in rows if r.get("iou") is not None]
    counted = [r for r in scored if r.get("union") is not None]
    absent = [r for r in rows if r.get("absent")]
    latencies = [r["latency_s"] for r in rows if r.get("latency_s") is not None]

    def stats(key: str) -> tuple[float | None, float | None]:
        values = [r[key] for r in rows if r.get(key) is not None]
        return (float(sum(values) / len(values)) if values else None), percentile(values, 95)

    out = {
        "n": len(rows),
        "giou": giou([r["iou"] for r in scored]),
        "ciou": ciou((r["intersection"] for r in counted), (r["union"] for r in counted)),
        "no_target_accuracy": (sum(r["status"] == "no_mask" for r in absent) / len(absent)
                               if absent else None),
        "n_absent": len(absent),
        "status_counts": dict(sorted(Counter(status_key(r["status"], r.get("error"))
                                             for r in rows).items())),
    }
    for key in ("rounds", "llm_calls", "prompt_tokens", "completion_tokens"):
        out[f"{key}_mean"], out[f"{key}_p95"] = stats(key)
    out["latency_mean_s"] = float(sum(latencies) / len(latencies)) if latencies else None
    out["latency_p50_s"] = percentile(latencies, 50)
    out["latency_p95_s"] = percentile(latencies, 95)
    split = {}
    for flag, name in ((True, "sentence"), (False, "phrase")):
        part = [r["iou"] for r in scored if r.get("is_sentence") is flag]
        if part:
            split[name] = {"n": len(part), "giou": giou(part)}
    out["giou_by_is_sentence"] = split or None
    return {k: _rounded(v) for k, v in out.items()}


def _rounded(value):
    if isinstance(value, float):
        return round(value, 6) if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    return value

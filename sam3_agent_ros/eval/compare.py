"""``sam3-agent eval-compare A B``: two runs side by side, judged on the samples both answered."""

from __future__ import annotations

import json
from pathlib import Path

from sam3_agent_ros.eval import metrics
from sam3_agent_ros.eval.report import SUMMARY
from sam3_agent_ros.eval.runner import SAMPLES, read_samples_file

FIGURES = ("n", "giou", "ciou", "no_target_accuracy", "rounds_mean", "rounds_p95",
           "llm_calls_mean", "prompt_tokens_mean", "prompt_tokens_p95", "completion_tokens_mean",
           "latency_p50_s", "latency_p95_s", "samples_per_s")
SETTINGS = ("llm.backend", "llm.model", "segmenter.backend", "agent.max_image_side")


class CompareError(ValueError):
    """An output folder without a readable summary.json / samples.jsonl."""


def load_run(out_dir: str | Path) -> tuple[dict, list[dict]]:
    out_dir = Path(out_dir)
    try:
        summary = json.loads((out_dir / SUMMARY).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CompareError(f"{out_dir}: no readable {SUMMARY} ({exc})") from None
    if not isinstance(summary, dict):
        raise CompareError(f"{out_dir}: {SUMMARY} is not a JSON object")
    return summary, read_samples_file(out_dir / SAMPLES)


def compare(a: tuple[dict, list[dict]], b: tuple[dict, list[dict]], names=("A", "B"),
            top: int = 10) -> str:
    """The text printed by ``eval-compare``: figures, settings that differ, then the samples
    whose IoU changed most, and the scores recomputed on the common samples only."""
    (summary_a, rows_a), (summary_b, rows_b) = a, b
    lines = [f"{'figure':<24}{names[0]:>14}{names[1]:>14}{'B - A':>12}"]
    for key in FIGURES:
        va, vb = summary_a.get(key), summary_b.get(key)
        delta = vb - va if isinstance(va, (int, float)) and isinstance(vb, (int, float)) else None
        lines.append(f"{key:<24}{_cell(va):>14}{_cell(vb):>14}{_cell(delta, signed=True):>12}")
    data_a, data_b = (x.get("dataset", {}).get("path") for x in (summary_a, summary_b))
    if data_a != data_b:
        lines += ["", f"note: different datasets ({data_a} vs {data_b})"]
    config_a, config_b = summary_a.get("config", {}), summary_b.get("config", {})
    changed = sorted(k for k in set(config_a) | set(config_b) if config_a.get(k) != config_b.get(k))
    shown = changed or [k for k in SETTINGS if k in config_a]
    lines += ["", "settings that differ:" if changed else "settings (identical):"]
    lines += [f"  {k}: {config_a.get(k)!r} -> {config_b.get(k)!r}" if changed
              else f"  {k}: {config_a.get(k)!r}" for k in shown]

    by_a = {r["id"]: r for r in rows_a}
    common = [(by_a[r["id"]], r) for r in rows_b if r["id"] in by_a]
    only = len(rows_a) - len(common), len(rows_b) - len(common)
    lines += ["", f"common samples: {len(common)} (only in {names[0]}: {only[0]}, only in "
                  f"{names[1]}: {only[1]})"]
    if common:
        for name, side in ((names[0], 0), (names[1], 1)):
            rows = [pair[side] for pair in common]
            counted = [r for r in rows if r.get("union") is not None]
            g = metrics.giou([r["iou"] for r in rows])
            c = metrics.ciou((r["intersection"] for r in counted), (r["union"] for r in counted))
            lines.append(f"  on the common samples, {name}: gIoU {_cell(g)}, cIoU {_cell(c)}")
        moved = sorted(common, key=lambda p: (-abs(p[1]["iou"] - p[0]["iou"]), p[0]["id"]))
        moved = [p for p in moved if p[1]["iou"] != p[0]["iou"]][:top]
        lines += ["", f"largest IoU changes ({len(moved)} shown):" if moved
                  else "no sample changed its IoU"]
        for ra, rb in moved:
            lines.append(f"  {rb['iou'] - ra['iou']:+.3f}  {ra['id']}: {ra['iou']:.3f} "
                         f"({ra['status']}) -> {rb['iou']:.3f} ({rb['status']})  "
                         f"\"{ra['query'][:70]}\"")
    return "\n".join(lines) + "\n"


def _cell(value, signed: bool = False) -> str:
    if value is None:
        return "-"
    if isinstance(value, int):
        return f"{value:+d}" if signed else str(value)
    return f"{value:+.3f}" if signed else f"{value:.3f}"

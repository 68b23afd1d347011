"""The files of an evaluation run: ``summary.json`` and ``report.md`` with the worst samples drawn
as the prediction beside the truth (``worst/*.jpg``). Both are written with every URL redacted
(``redact.py``); a sample refused for its paths is never drawn."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np

from sam3_agent_ros import render
from sam3_agent_ros.config import backends_of, demo_backends_warning
from sam3_agent_ros.eval import metrics
from sam3_agent_ros.eval.datasets import Dataset, SampleError, load_image, load_truth
from sam3_agent_ros.eval.runner import mask_filename
from sam3_agent_ros.redact import redact_text, redact_value

SUMMARY, REPORT, WORST = "summary.json", "report.md", "worst"
_PANEL_WIDTH = 480


# A field whose value would be a secret: its name's last word is one of these ("api_key",
# "auth_token"), not merely containing one ("max_tokens", "api_key_env" are kept).
_SECRET_WORDS = frozenset({"key", "token", "secret", "password", "passwd", "credentials"})


def holds_secret(name: str) -> bool:
    return name.rsplit(".", 1)[-1].rsplit("_", 1)[-1].lower() in _SECRET_WORDS


def public_config(params: dict) -> dict:
    """The parameters with credentials and key-like query parameters of URLs redacted. No
    parameter of the table holds a secret (the API key never is one: ``llm.api_key_env`` names
    the variable that holds it), so all of them are kept; a name that would hold one
    (``*_key``, ``*_token``, ...) is left out."""
    return redact_value({name: value for name, value in params.items()
                         if not holds_secret(name)})


def build_summary(rows: list[dict], dataset: Dataset, params: dict, *, jobs: int,
                  wall_s: float, new_samples: int, complete: bool) -> dict:
    summary = metrics.summarize(rows)
    summary.update(
        dataset={"path": str(dataset.root), "name": dataset.name, "layout": dataset.layout,
                 "samples": len(dataset.samples)},
        complete=complete, jobs=jobs, wall_s=round(wall_s, 3),
        samples_per_s=round(new_samples / wall_s, 4) if wall_s > 0 and new_samples else None,
        config=public_config(params), backends=backends_of(params))
    return summary


def write_summary(out_dir: Path, summary: dict) -> Path:
    path = out_dir / SUMMARY
    path.write_text(json.dumps(redact_value(summary), indent=2) + "\n", encoding="utf-8")
    return path


def _llm_name(config: dict) -> str:
    if config.get("llm.backend") == "openai":
        return f"`{config.get('llm.model')}` at `{config.get('llm.base_url')}`"
    return f"`{config.get('llm.backend')}`"


def _fmt(value, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def worst_rows(rows: list[dict], count: int) -> list[dict]:
    """The lowest IoUs first; among equals, the larger truth first (a bigger miss). Refused
    samples are left out: nothing of theirs is read, so nothing is drawn."""
    scored = [r for r in rows if r.get("iou") is not None and not r.get("refused")]
    return sorted(scored, key=lambda r: (r["iou"], -(r.get("union") or 0), r["id"]))[:count]


def write_report(out_dir: Path, summary: dict, rows: list[dict], dataset: Dataset,
                 worst: int = 8) -> Path:
    s = summary
    split = s.get("giou_by_is_sentence") or {}
    lines = [f"# Evaluation of {s['dataset']['name']}", "",
             f"Dataset `{s['dataset']['path']}` ({s['dataset']['layout']} layout), "
             f"{s['n']} of {s['dataset']['samples']} samples"
             + ("" if s["complete"] else " (**incomplete**: rerun with `--resume`)") + ". "
             f"LLM {_llm_name(s['config'])}, "
             f"segmenter `{s['config'].get('segmenter.backend')}`, {s['jobs']} job(s).", ""]
    demo = demo_backends_warning(s["config"])
    if demo:
        lines += [f"**{demo}**", ""]
    lines += ["| figure | value |", "|---|---|",
              f"| gIoU | {_fmt(s['giou'])} |", f"| cIoU | {_fmt(s['ciou'])} |",
              f"| no-target accuracy ({s['n_absent']} absent-object samples) | "
              f"{_fmt(s['no_target_accuracy'])} |"]
    for name, part in split.items():
        lines.append(f"| gIoU, {name} queries ({part['n']}) | {_fmt(part['giou'])} |")
    lines += [f"| rounds mean / p95 | {_fmt(s['rounds_mean'], 2)} / {_fmt(s['rounds_p95'], 1)} |",
              f"| LLM calls mean / p95 | {_fmt(s['llm_calls_mean'], 2)} / "
              f"{_fmt(s['llm_calls_p95'], 1)} |",
              f"| prompt tokens mean / p95 | {_fmt(s['prompt_tokens_mean'], 0)} / "
              f"{_fmt(s['prompt_tokens_p95'], 0)} |",
              f"| completion tokens mean / p95 | {_fmt(s['completion_tokens_mean'], 0)} / "
              f"{_fmt(s['completion_tokens_p95'], 0)} |",
              f"| latency p50 / p95 (s) | {_fmt(s['latency_p50_s'], 2)} / "
              f"{_fmt(s['latency_p95_s'], 2)} |",
              f"| samples/s (this run, {s['jobs']} jobs) | {_fmt(s['samples_per_s'], 2)} |",
              "", "Status counts: " + ", ".join(f"{k} {v}" for k, v in s["status_counts"].items())
              + ".", ""]
    chosen = worst_rows(rows, worst)
    if chosen:
        lines += [f"## The {len(chosen)} worst samples", "",
                  "Left: the prediction; right: the truth (grey: ignored pixels).", "",
                  "| id | query | status | IoU | error |", "|---|---|---|---|---|"]
        by_id = {sample.id: sample for sample in dataset.samples}
        pictures = []
        for row in chosen:
            error = (row.get("error") or "").replace("|", "/")[:120]
            query = row["query"].replace("|", "/")
            lines.append(f"| {row['id']} | {query} | {row['status']} | {row['iou']:.3f} | "
                         f"{error} |")
            sample = by_id.get(row["id"])
            picture = _draw_worst(out_dir, row, sample) if sample else None
            if picture:
                pictures.append(f"**{row['id']}** \"{row['query']}\" (IoU {row['iou']:.3f})\n\n"
                                f"![{row['id']}]({picture})\n")
        lines += [""] + pictures
    path = out_dir / REPORT
    path.write_text(redact_text("\n".join(lines).rstrip() + "\n"), encoding="utf-8")
    return path


def _draw_worst(out_dir: Path, row: dict, sample) -> str | None:
    try:
        image = load_image(sample)
        truth, ignore = load_truth(sample, image.shape[:2])
    except SampleError:
        return None
    prediction = None
    if row.get("mask"):
        mask = cv2.imread(str(out_dir / row["mask"]), cv2.IMREAD_GRAYSCALE)
        if mask is not None and mask.shape == truth.shape:
            prediction = mask > 0
    left = render.overlay_masks(image, [prediction], ["pred"]) if prediction is not None \
        else image.copy()
    right = image.copy()
    if ignore is not None:
        right[ignore] = (right[ignore] * 0.3 + 128 * 0.7).astype(np.uint8)
    if truth.any():
        right = render.overlay_masks(right, [truth], ["truth"])
    panels = [_captioned(left, f"prediction: {row['status']}"),
              _captioned(right, "truth" if truth.any() else "truth: absent")]
    picture = np.concatenate(panels, axis=1)
    name = f"{WORST}/{Path(mask_filename(row['id'])).stem}.jpg"
    (out_dir / WORST).mkdir(parents=True, exist_ok=True)
    cv2.imwrite(str(out_dir / name), cv2.cvtColor(picture, cv2.COLOR_RGB2BGR),
                [cv2.IMWRITE_JPEG_QUALITY, 85])
    return name


def _captioned(image: np.ndarray, caption: str) -> np.ndarray:
    height, width = image.shape[:2]
    scale = _PANEL_WIDTH / width
    panel = cv2.resize(image, (_PANEL_WIDTH, max(1, round(height * scale))),
                       interpolation=cv2.INTER_AREA)
    band = np.full((28, _PANEL_WIDTH, 3), 32, np.uint8)
    cv2.putText(band, caption[:60], (6, 20), cv2.FONT_HERSHEY_SIMPLEX, 0.55, (255, 255, 255), 1,
                cv2.LINE_AA)
    return np.concatenate([band, panel], axis=0)

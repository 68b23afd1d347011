"""The node's messages as the plain values a page shows (pure; messages are read by attribute,
so tests pass simple objects). Text from the node is passed as text: the page writes it with
``textContent``, never as markup.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from sam3_agent_ros.core import guarded_json

LEVEL_WORDS = {0: "OK", 1: "WARN", 2: "ERROR", 3: "STALE"}
MAX_JSON_CHARS = 1_000_000  # a result JSON with many masks stays far below
MAX_TEXT_CHARS = 4000  # reasoning and messages on the page
MAX_MASKS_SHOWN = 50


def level_word(level: Any) -> str:
    """DiagnosticStatus.level (bytes in rclpy, or an int) -> OK / WARN / ERROR / STALE."""
    number = level[0] if isinstance(level, (bytes, bytearray)) and level else level
    return LEVEL_WORDS.get(number, "STALE") if isinstance(number, int) else "STALE"


def json_text(text: str) -> dict | None:
    """A status / result JSON from the node as a dict, or None when it is not one (see
    ``read_json`` for why)."""
    value, _problem, _ = read_json(text)
    return value


def read_json(text: str) -> tuple[dict | None, str | None, list[str]]:
    """A JSON object from the node, read defensively: ``(value, problem, non_finite)``.
    ``value`` is None with ``problem`` saying why when the text is not a JSON object;
    ``non_finite`` lists the paths of numbers that are not finite (a bare ``Infinity`` or
    ``NaN``, which Python accepts and a browser's ``JSON.parse`` does not, or ``1e999``): they
    are replaced by None so that nothing non-finite reaches a page."""
    if len(text) > MAX_JSON_CHARS:
        return None, f"{len(text)} characters (the console reads at most {MAX_JSON_CHARS})", []
    try:
        value = guarded_json.loads(text)
    except (ValueError, RecursionError) as exc:
        return None, f"not JSON ({exc})", []
    if not isinstance(value, dict):
        return None, f"JSON {type(value).__name__}, not an object", []
    non_finite: list[str] = []
    return finite(value, "", non_finite), None, non_finite


def finite(value: Any, path: str = "", found: list[str] | None = None) -> Any:
    """``value`` with every non-finite float replaced by None (its path appended to
    ``found``)."""
    if isinstance(value, float) and not math.isfinite(value):
        if found is not None and len(found) < 20:
            found.append(path or "(the value)")
        return None
    if isinstance(value, dict):
        return {k: finite(v, f"{path}.{k}" if path else str(k), found) for k, v in value.items()}
    if isinstance(value, list):
        return [finite(v, f"{path}[{i}]", found) for i, v in enumerate(value)]
    return value


def page_json(message: dict) -> str:
    """A message for a page as strict JSON (what ``JSON.parse`` reads): a non-finite number
    becomes null rather than ``Infinity``, which would make the page drop the whole message."""
    try:
        return json.dumps(message, default=str, allow_nan=False)
    except ValueError:
        return json.dumps(finite(message), default=str, allow_nan=False)


MAX_PHASES = 64  # phases remembered for the query shown


def status_view(status: dict, previous: dict | None = None) -> dict:
    """A ``~/status`` for the page, with the phases its query went through so far (``previous``:
    the view shown before; a status that arrives between two page updates still shows). The
    reasoning is the newest of this query: a status without any (the node sends none while it
    thinks) keeps this query's last one, and a new query starts with none, never the previous
    query's."""
    keep = ("query_id", "phase", "round", "tool", "text_prompt", "num_masks", "elapsed_s")
    view = {key: status.get(key) for key in keep}
    same_query = bool(previous) and previous.get("query_id") == view["query_id"]  # type: ignore
    reasoning = _text(status.get("reasoning"))
    if not reasoning and same_query:
        reasoning = previous.get("reasoning", "")  # type: ignore[union-attr]
    view["reasoning"] = reasoning
    phases = list(previous["phases"]) if same_query else []  # type: ignore[index]
    if isinstance(view["phase"], str) and (not phases or phases[-1] != view["phase"]):
        phases.append(view["phase"][:40])
    view["phases"] = phases[-MAX_PHASES:]
    return view


def feedback_view(feedback: Any, query_id: str) -> dict:
    """A goal's feedback as a ``~/status`` (the same fields)."""
    status = {name: getattr(feedback, name, None) for name in
              ("phase", "round", "tool", "text_prompt", "num_masks", "elapsed_s", "reasoning")}
    status["query_id"] = query_id
    return status


def result_view(result: dict, non_finite: list[str] | None = None) -> dict:
    """The result JSON's fields the page shows, masks bounded. ``non_finite``: the paths
    ``read_json`` found not finite (said in ``warning``)."""
    given = result.get("masks")
    masks: list[Any] = given if isinstance(given, list) else []
    stamp = result.get("stamp") if isinstance(result.get("stamp"), dict) else {}
    view = {"query_id": _text(result.get("query_id")), "query": _text(result.get("query")),
            "status": _text(result.get("status")) or "?", "error": _text(result.get("error")),
            "refines": result.get("refines"), "frame_id": _text(result.get("frame_id")),
            "stamp": [stamp.get("sec"), stamp.get("nanosec")],  # type: ignore[union-attr]
            "masks": [_mask_view(m) for m in masks[:MAX_MASKS_SHOWN] if isinstance(m, dict)],
            "masks_total": len(masks), "warning": ""}
    if non_finite:
        view["warning"] = ("the node sent numbers that are not finite (not JSON), shown as "
                           "missing: " + ", ".join(non_finite))
    return view


def unreadable_result(problem: str, text: str) -> dict:
    """What the page shows for a ``~/result`` it cannot read: an error line, never nothing."""
    return {"query_id": "", "query": "", "status": "unreadable",
            "error": _text(f"the node sent a result the console cannot read: {problem}; "
                           f"it begins {text[:120]!r}"),
            "refines": None, "frame_id": "", "stamp": [None, None], "masks": [],
            "masks_total": 0, "warning": ""}


def answered(view: dict) -> bool:
    """A result view that has an overlay of its own (the node draws one only for these)."""
    return view.get("status") == "succeeded" and bool(view.get("masks"))


def _point(value: Any) -> dict | None:
    """``{"x", "y", "z"}`` of finite numbers, else None."""
    if not isinstance(value, dict):
        return None
    point = {k: value.get(k) for k in ("x", "y", "z")}
    ok = all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
             for v in point.values())
    return point if ok else None


def _mask_view(mask: dict) -> dict:
    """One mask: its 3D beside the reason when it has none. ``position`` is there only when the
    node measured 3D (depth on); a ``target`` whose position is missing is no target (the
    node's ``target_error`` says why, else the page says that the node gave no reason)."""
    view = {"id": mask.get("id"), "score": mask.get("score"), "bbox": mask.get("bbox"),
            "candidate": mask.get("candidate") if isinstance(mask.get("candidate"), int) else 0,
            "position": _point(mask.get("position")),
            "position_error": _text(mask.get("position_error")),
            "target": None, "target_error": _text(mask.get("target_error"))}
    if "position" in mask and view["position"] is None and not view["position_error"]:
        view["position_error"] = "no position (the node gave no reason)"
    target = mask.get("target")
    if isinstance(target, dict) and _point(target.get("position")) is not None:
        view["target"] = {"frame_id": _text(target.get("frame_id")),
                          "position": _point(target.get("position"))}
    elif ("target" in mask or "target_error" in mask) and not view["target_error"]:
        frame = _text(target.get("frame_id")) if isinstance(target, dict) else ""
        view["target_error"] = (f"no position in {frame} " if frame else "no position in the "
                                "target frame ") + "(the node gave no reason)"
    view["grasp"], view["grasp_error"] = _best_grasp(mask)
    return view


def _number(value: Any) -> float | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok else None


def _best_grasp(mask: dict) -> tuple[dict | None, str]:
    """The mask's best grasp (the first of its ``grasps``: width, score, position) or why it
    has none (``grasp_error``); (None, "") for a mask the node planned no grasps for."""
    grasps = mask.get("grasps")
    if "grasps" not in mask and "grasp_error" not in mask:
        return None, ""
    error = _text(mask.get("grasp_error"))
    if isinstance(grasps, list) and grasps and isinstance(grasps[0], dict):
        best = grasps[0]
        pose = best.get("pose") if isinstance(best.get("pose"), dict) else {}
        position = _point(pose.get("position"))  # type: ignore[union-attr]
        if position is not None:
            return {"width": _number(best.get("width")), "score": _number(best.get("score")),
                    "position": position, "count": len(grasps)}, ""
        return None, error or "a grasp without a position (the node gave no reason)"
    return None, error or "no grasp (the node gave no reason)"


# The model's reasoning names candidate masks "[2]" or "mask 2" (its numbering of the last
# segment call); the result numbers the masks it kept 1..N.
_CANDIDATE = re.compile(r"\[(\d{1,4})\]|\b([Mm]ask) #?(\d{1,4})\b")


def candidate_ids(result: dict) -> dict[int, int]:
    """A result view's ``{candidate id: result id}`` (masks that name their candidate)."""
    return {m["candidate"]: m["id"] for m in result.get("masks", [])
            if m.get("candidate") and isinstance(m.get("id"), int)}


def renumbered(reasoning: str, candidates: dict[int, int]) -> str:
    """The reasoning with the candidates' numbers written as the result's mask ids
    (``[2]`` -> ``[mask 1]``, ``mask 2`` -> ``mask 1``; a candidate the answer does not hold:
    ``[candidate 3, not in the answer]``), so that the page shows one numbering."""
    if not candidates:
        return reasoning

    def rewrite(match: re.Match) -> str:
        number = int(match.group(1) or match.group(3))
        word, kept = match.group(2), candidates.get(number)
        if kept is not None:
            return f"[mask {kept}]" if word is None else f"{word} {kept}"
        return (f"[candidate {number}, not in the answer]" if word is None
                else f"candidate {number} (not in the answer)")
    return _CANDIDATE.sub(rewrite, reasoning)


def detections_view(msg: Any) -> dict:
    detections = []
    for d in list(msg.detections)[:MAX_MASKS_SHOWN * 4]:
        position = None
        if d.position_valid:
            position = _point({"x": d.position.x, "y": d.position.y, "z": d.position.z})
        detections.append({"concept": _text(d.concept), "id": int(d.id),
                           "score": round(float(d.score), 3),
                           "bbox": [round(float(v), 1) for v in d.bbox], "position": position})
    return {"frame_id": msg.header.frame_id, "detections": detections}


def _text(value: Any) -> str:
    return "" if value is None else str(value)[:MAX_TEXT_CHARS]

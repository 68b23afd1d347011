"""The node's messages as the plain values a page shows (pure; messages are read by attribute,
so tests pass simple objects). Text from the node is passed as text: the page writes it with
``textContent``, never as markup.
"""

from __future__ import annotations

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
    """A status / result JSON from the node as a dict, or None when it is not one."""
    if len(text) > MAX_JSON_CHARS:
        return None
    try:
        value = guarded_json.loads(text)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


MAX_PHASES = 64  # phases remembered for the query shown


def status_view(status: dict, previous: dict | None = None) -> dict:
    """A ``~/status`` for the page, with the phases its query went through so far (``previous``:
    the view shown before; a status that arrives between two page updates still shows)."""
    keep = ("query_id", "phase", "round", "tool", "text_prompt", "num_masks", "elapsed_s")
    view = {key: status.get(key) for key in keep}
    view["reasoning"] = _text(status.get("reasoning"))
    phases = list(previous["phases"]) if previous and previous.get("query_id") == view[
        "query_id"] else []
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


def result_view(result: dict) -> dict:
    """The result JSON's fields the page shows, masks bounded."""
    given = result.get("masks")
    masks: list[Any] = given if isinstance(given, list) else []
    return {"query_id": result.get("query_id"), "query": _text(result.get("query")),
            "status": result.get("status"), "error": _text(result.get("error")),
            "refines": result.get("refines"), "frame_id": result.get("frame_id"),
            "masks": [_mask_view(m) for m in masks[:MAX_MASKS_SHOWN] if isinstance(m, dict)],
            "masks_total": len(masks)}


def _mask_view(mask: dict) -> dict:
    target = mask.get("target") if isinstance(mask.get("target"), dict) else None
    return {"id": mask.get("id"), "score": mask.get("score"), "bbox": mask.get("bbox"),
            "position": mask.get("position"), "position_error": _text(mask.get("position_error")),
            "target": None if target is None else {"frame_id": target.get("frame_id"),
                                                   "position": target.get("position")},
            "target_error": _text(mask.get("target_error"))}


def detections_view(msg: Any) -> dict:
    detections = []
    for d in list(msg.detections)[:MAX_MASKS_SHOWN * 4]:
        position = None
        if d.position_valid:
            position = {"x": d.position.x, "y": d.position.y, "z": d.position.z}
        detections.append({"concept": _text(d.concept), "id": int(d.id),
                           "score": round(float(d.score), 3),
                           "bbox": [round(float(v), 1) for v in d.bbox], "position": position})
    return {"frame_id": msg.header.frame_id, "detections": detections}


def health_view(msg: Any, node_name: str) -> list[dict]:
    """The statuses of one DiagnosticArray that belong to the node (name ``<node>: <area>``)."""
    prefix = node_name + ":"
    return [{"name": s.name[len(prefix):].strip(), "level": level_word(s.level),
             "message": _text(s.message)} for s in msg.status if s.name.startswith(prefix)]


def stale_health(statuses: list[dict], age_s: float) -> list[dict]:
    """The last statuses seen, each STALE: the node sent no diagnostics for ``age_s``."""
    return [dict(s, level="STALE", message=f"no diagnostics for {age_s:.0f} s (last: "
                                           f"{s['level']} {s['message']})") for s in statuses]


def _text(value: Any) -> str:
    return "" if value is None else str(value)[:MAX_TEXT_CHARS]

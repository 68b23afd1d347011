"""JSON for what leaves the node: never ``NaN`` or ``Infinity`` (pure).

Python's ``json.dumps`` writes a non-finite float as the bare words ``NaN`` / ``Infinity``,
which no JSON parser reads (a console's ``JSON.parse`` throws and the answer never shows).
``dumps`` writes with ``allow_nan=False``; should a value still hold a non-finite number (the
steps that make numbers refuse such inputs with a reason, CONTRACTS §11: this is the last
guard), that number is written ``null`` and the problem named in ``non_finite_paths``, never
sent as invalid JSON and never raised into the caller.
"""

from __future__ import annotations

import json
import math
from typing import Any

MAX_DEPTH = 64  # JSON the node writes is a few levels deep; deeper is left as is


def dumps(value: Any, **kwargs: Any) -> str:
    """``json.dumps(value, allow_nan=False)``, with any non-finite float written ``null``."""
    try:
        return json.dumps(value, allow_nan=False, **kwargs)
    except ValueError:
        return json.dumps(finite(value), allow_nan=False, **kwargs)


def finite(value: Any, depth: int = 0) -> Any:
    """``value`` with every non-finite float (in dicts, lists and tuples) replaced by None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if depth >= MAX_DEPTH:
        return value
    if isinstance(value, dict):
        return {key: finite(item, depth + 1) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(item, depth + 1) for item in value]
    return value


def non_finite_paths(value: Any, path: str = "", depth: int = 0) -> list[str]:
    """Where ``value`` holds a non-finite float (``masks[0].position.x``); [] when nowhere."""
    if isinstance(value, float):
        return [] if math.isfinite(value) else [path or "."]
    if depth >= MAX_DEPTH:
        return []
    found: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            found += non_finite_paths(item, f"{path}.{key}" if path else str(key), depth + 1)
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            found += non_finite_paths(item, f"{path}[{index}]", depth + 1)
    return found

"""The report of a demo run, one type for both demos (pure: no ROS).

A ``DemoReport`` holds one outcome per query of the bag (``tabletop_scoring.QueryOutcome`` for
``sam3-agent demo``, ``follow_scoring.FollowOutcome`` for ``demo-follow``: both say whether the
node answered, whether the answer is right, what answered, and their JSON) and what the run
itself produced; it is printed as a summary and written as ``OUT/report.json``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from sam3_agent_ros.config import demo_backends_warning

REPORT_JSON = "report.json"


class Outcome(Protocol):
    """One query of the bag and what the node made of it."""

    backends: dict | None  # the result's "backends" (what answered)

    @property
    def answered(self) -> bool: ...

    @property
    def ok(self) -> bool: ...

    def to_json(self) -> dict: ...


@dataclass
class DemoReport:
    outcomes: list[Outcome] = field(default_factory=list)
    wall_s: float = 0.0
    output_bag: str = ""  # the node's outputs recorded, when the demo records them
    output_counts: dict[str, int] = field(default_factory=dict)
    node_log: str = ""
    error: str | None = None
    # ``sam3-agent demo``'s standing-concepts run (``concepts_scoring.ConceptsOutcome``: ``ok``,
    # ``to_json()``), or None
    concepts: Any = None

    @property
    def answered(self) -> int:
        return sum(1 for o in self.outcomes if o.answered)

    @property
    def correct(self) -> int:
        return sum(1 for o in self.outcomes if o.ok)

    @property
    def ok(self) -> bool:
        return (self.error is None and bool(self.outcomes) and self.correct == len(self.outcomes)
                and (self.concepts is None or self.concepts.ok))

    def to_json(self) -> dict:
        return {"answered": self.answered, "correct": self.correct, "total": len(self.outcomes),
                "wall_s": round(self.wall_s, 3), "output_bag": self.output_bag,
                "output_counts": self.output_counts, "node_log": self.node_log,
                "error": self.error, "queries": [o.to_json() for o in self.outcomes],
                "concepts": self.concepts.to_json() if self.concepts is not None else None}

    def write(self, out_dir: Path) -> Path:
        path = Path(out_dir) / REPORT_JSON
        path.write_text(json.dumps(self.to_json(), indent=2) + "\n")
        return path


def backends_lines(outcomes: list[Outcome]) -> list[str]:
    """What answered (results' ``backends``), once per distinct pair, marked when a demo
    backend did."""
    seen = []
    for outcome in outcomes:
        if outcome.backends and outcome.backends not in seen:
            seen.append(outcome.backends)
    lines = []
    for backends in seen:
        text = f"backends: llm {backends.get('llm')}, segmenter {backends.get('segmenter')}"
        if demo_backends_warning({f"{part}.backend": value for part, value in backends.items()}):
            text += " (built-in demo backends: these answers are not from a model)"
        lines.append(text)
    return lines

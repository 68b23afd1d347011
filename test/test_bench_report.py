"""bench/report.py: every benchmark's section builder returns its Section (one that did not
crashed `make bench` at its very end, after every benchmark had run)."""

from __future__ import annotations

import ast
from pathlib import Path

REPORT = Path(__file__).resolve().parents[1] / "bench" / "report.py"


def test_every_section_builder_returns_its_section():
    tree = ast.parse(REPORT.read_text(encoding="utf-8"))
    functions = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
    builders = next(node.value for node in tree.body if isinstance(node, ast.Assign)
                    and any(getattr(t, "id", "") == "BUILDERS" for t in node.targets))
    names = [pair.elts[1].id for pair in builders.elts]
    assert len(names) >= 15
    for name in names:
        returns = [node for node in ast.walk(functions[name]) if isinstance(node, ast.Return)
                   and isinstance(node.value, ast.Name) and node.value.id == "s"]
        assert returns, f"bench/report.py: {name}() builds a Section but does not return it"

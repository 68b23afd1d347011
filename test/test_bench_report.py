"""bench/report.py: every benchmark's section builder (in bench/report_*.py) returns its Section
(one that did not crashed `make bench` at its very end, after every benchmark had run)."""

from __future__ import annotations

import ast
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench"
REPORT = BENCH / "report.py"


def test_every_section_builder_returns_its_section():
    tree = ast.parse(REPORT.read_text(encoding="utf-8"))
    functions = {node.name: node for path in sorted(BENCH.glob("report*.py"))
                 for node in ast.parse(path.read_text(encoding="utf-8")).body
                 if isinstance(node, ast.FunctionDef)}
    builders = next(node.value for node in tree.body if isinstance(node, ast.Assign)
                    and any(getattr(t, "id", "") == "BUILDERS" for t in node.targets))
    names = [pair.elts[1].id for pair in builders.elts]
    assert len(names) >= 15
    for name in names:
        returns = [node for node in ast.walk(functions[name]) if isinstance(node, ast.Return)
                   and isinstance(node.value, ast.Name) and node.value.id == "s"]
        assert returns, f"bench/report.py: {name}() builds a Section but does not return it"


def load_report():
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_report", REPORT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_answer_memory_section_compares_the_byte_bound_with_none():
    def run(config, baseline, after, refined_error):
        return {"config": config, "answers": 10, "idle_s": 15, "peak_rss_mib": after + 400,
                "baseline_mib": {"rss": baseline}, "at_last_result_mib": {"rss": after},
                "after_mib": {"rss": after},
                "refinements": {"n2": {"status": "failed" if refined_error else "succeeded",
                                       "error": refined_error},
                                "n9": {"status": "succeeded", "error": None}}}

    data = {"command": "python bench/answer_memory.py", "width": 7680, "height": 5200,
            "frame_mib": 114.3, "max_kept_mib": 256,
            "runs": [run("bounded", 190, 680, "its answer expired"), run("unbounded", 190, 1270,
                                                                          None)]}
    section = load_report().answer_memory(data)
    text = "\n".join(section.lines)
    assert "| bounded | 190 |" in text and "failed: its answer expired" in text
    (name, value, target, status), = section.summary
    assert value == "+490 MiB after idle (unbounded: +1080, 0.45x)"
    assert target == "<= max_kept_mib + 343 MiB" and status == "met"

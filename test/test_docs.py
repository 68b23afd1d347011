"""The docs (README.md, CONTRIBUTING.md, docs/*.md) as a reader meets them: every command block
says how it is checked (run by test/test_docs_run.py, or what it needs), one command convention
stated once at the top of each file and kept, links that resolve inside the repository, no
reference to files outside it, no test counts or suite timings typed by hand (they go stale)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from test.docs_blocks import (
    MARKED_LANGUAGES,
    NEEDS,
    REPO_ROOT,
    all_blocks,
    blocks,
    doc_files,
    indented_code_lines,
)

DOCS = [pytest.param(path, id=str(path.relative_to(REPO_ROOT))) for path in doc_files()]
CONVENTION = "source .venv/bin/activate"


def test_the_docs_hold_runnable_blocks_of_each_kind():
    marked = [b for b in all_blocks() if b.language in MARKED_LANGUAGES]
    assert sum(b.runnable for b in marked) >= 8
    assert {b.language for b in marked if b.runnable} == {"bash", "python"}


@pytest.mark.parametrize("path", DOCS)
def test_every_command_block_is_runnable_or_says_what_it_needs(path):
    problems = []
    for block in blocks(path):
        if block.marker_error:
            problems.append(f"{block.where}: {block.marker_error}")
        elif not block.language:
            problems.append(f"{block.where}: a fence without a language (use text for output)")
        elif block.language in MARKED_LANGUAGES and block.marker is None:
            problems.append(f"{block.where}: {block.language} block without <!-- runnable --> "
                            "or <!-- needs: ... --> on the line before")
        elif block.language not in MARKED_LANGUAGES and block.runnable:
            problems.append(f"{block.where}: a {block.language} block cannot be runnable")
        elif block.marker and not block.runnable:
            unknown = [n for n in block.needs if n not in NEEDS] or \
                ([] if block.needs else ["(nothing)"])
            if unknown:
                problems.append(f"{block.where}: needs {', '.join(unknown)}: not one of "
                                f"{', '.join(NEEDS)}")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("path", DOCS)
def test_no_indented_code_blocks(path):
    assert indented_code_lines(path) == [], "use a fenced block with a marker"


@pytest.mark.parametrize("path", DOCS)
def test_the_command_convention_is_stated_near_the_top(path):
    head = "\n".join(path.read_text(encoding="utf-8").splitlines()[:12])
    assert CONVENTION in head, f"{path.name}: say how commands are run ({CONVENTION!r})"


@pytest.mark.parametrize("path", DOCS)
def test_commands_use_the_activated_venv(path):
    """The convention is the activated .venv: `sam3-agent ...`, `python ...`, `pytest ...`, not
    `.venv/bin/...` (other venvs, `.venv-jazzy/bin/...`, are named in full). Checked in code
    blocks and in inline commands (with arguments); naming the file `.venv/bin/sam3-agent` in a
    sentence is fine."""
    venv_command = r"(?<![\w-])\.venv/bin/(?:sam3-agent|python|pytest|sam3_agent_node|pip)\b"
    found = [f"{b.where}: {line.strip()}" for b in blocks(path) for line in b.code.splitlines()
             if re.search(venv_command, line)]
    text = path.read_text(encoding="utf-8")
    found += re.findall(r"`(" + venv_command + r" [^`]+)`", text)
    assert not found, f"{path.name}: {found} (write them as with the venv active)"


@pytest.mark.parametrize("path", DOCS)
def test_no_references_to_files_outside_the_repository(path):
    text = path.read_text(encoding="utf-8")
    assert "CONTRACTS" not in text, "the interface is docs/interface.md"
    assert not re.search(r"/work/|/shared/|briefs/", text)


@pytest.mark.parametrize("path", DOCS)
def test_relative_links_resolve(path):
    text = path.read_text(encoding="utf-8")
    missing = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        file_part = target.split("#")[0]
        if not (path.parent / file_part).exists():
            missing.append(target)
    assert not missing, f"{path.name}: links to nothing: {missing}"


_TEST_REFERENCE = re.compile(r"`((?:test|bench)/[\w/]+\.py)?((?:::\w+)*)`")


def cited_tests(text: str) -> list[tuple[str, str | None]]:
    """``(file, function or None)`` for every `test/x.py::name` cited; a bare `::name` cites a
    function of the file cited last (the docs' shorthand in a list)."""
    cited, current = [], None
    for file_part, names in _TEST_REFERENCE.findall(text):
        current = file_part or current
        if current is None:
            continue
        functions = [n for n in names.split("::") if n]
        cited += [(current, f) for f in functions] or [(current, None)]
    return cited


@pytest.mark.parametrize("path", DOCS)
def test_cited_tests_and_benchmarks_exist(path):
    """A doc that says "shown by test X" must not outlive X (renamed or moved tests)."""
    missing = []
    for file_part, function in cited_tests(path.read_text(encoding="utf-8")):
        source = REPO_ROOT / file_part
        if not source.is_file():
            missing.append(file_part)
        elif function and not re.search(rf"^(async )?def {function}\b",
                                        source.read_text(encoding="utf-8"), re.M):
            missing.append(f"{file_part}::{function}")
    assert not missing, f"{path.name} cites what does not exist: {missing}"


def test_cited_tests_read_the_shorthand():
    text = "`test/a.py::one`, `::two`; `test/b.py`; `::three`"
    assert cited_tests(text) == [("test/a.py", "one"), ("test/a.py", "two"), ("test/b.py", None),
                                 ("test/b.py", "three")]


@pytest.mark.parametrize("path", DOCS)
def test_no_hand_typed_test_counts_or_suite_durations(path):
    """Counts of tests and how long the suites or the demo take change with every commit:
    the tools print them (pytest, make setup, the demo), the docs do not copy them."""
    text = path.read_text(encoding="utf-8")
    counts = re.findall(r"\b\d{2,} (?:passed|tests|ROS tests)\b", text)
    assert not counts, f"{path.name}: {counts}"
    durations = re.findall(r"(?:SAM 3 (?:CPU )?test|make (?:test|demo)\S*|the demo)[^.\n]{0,40}"
                           r"~\d", text)
    assert not durations, f"{path.name}: {durations}"


def test_the_interface_document_covers_the_external_interface():
    text = (REPO_ROOT / "docs" / "interface.md").read_text(encoding="utf-8")
    for needle in ("segment_phrase", "examine_each_mask", "select_masks_and_return",
                   "report_no_mask", "~/result", "~/status", "~/segment", "llm.backend",
                   "sam3-agent run", "sam3-agent eval", "sam3_agent_node", "stop_follow"):
        assert needle in text, needle


def test_blocks_keep_their_own_text(tmp_path):
    """The parser: markers, languages and indented fences (a block in a list item)."""
    doc = Path(tmp_path / "x.md")
    doc.write_text("Intro\n\n<!-- runnable -->\n```bash\necho hi\n```\n\n1. step\n\n"
                   "   <!-- needs: GPU, network -->\n   ```bash\n   nvidia-smi\n     x\n   ```\n"
                   "```\nplain\n```\n<!-- runnable please -->\n```python\nprint(1)\n```\n")
    found = blocks(doc)
    assert [(b.language, b.marker, b.code) for b in found] == [
        ("bash", "runnable", "echo hi"), ("bash", "needs: GPU, network", "nvidia-smi\n  x"),
        ("", None, "plain"), ("python", None, "print(1)")]
    assert found[1].needs == ["GPU", "network"]
    assert found[3].marker_error == ("'runnable' takes nothing or ': slow' after it: "
                                     "'<!-- runnable please -->'")


def test_the_docs_agree_on_the_frame_of_the_3d_outputs():
    """issue 33: depth.md's tf2 section, interface.md §5 and the README said the 3D outputs are
    in the camera frame, also with ``target_frame`` set. The behaviour (``~/target`` in
    ``target_frame``, its stamp the colour frame's; ``~/detections`` in the camera frame) is held
    by test/ros/test_robot_frame_node.py; here every place that says which frame they are in
    names both cases."""
    def read(name: str) -> str:
        return (REPO_ROOT / name).read_text(encoding="utf-8")

    interface = read("docs/interface.md")
    for topic in ("~/target", "~/targets"):
        row = next(line for line in interface.splitlines() if line.startswith(f"| `{topic}` |"))
        assert "camera" in row and "target_frame" in row, row
    tf2 = read("docs/depth.md").split("## Into the robot's frame: tf2", 1)[1].split("\n## ")[0]
    assert "With `target_frame` set" in tf2 and "Without `target_frame`" in tf2
    readme = " ".join(read("README.md").split())
    assert "each with the header of the frame the answer was computed on" not in readme
    assert "`header.frame_id` the camera's, or `target_frame` for the 3D outputs" in readme
    assert (REPO_ROOT / "test" / "ros" / "test_robot_frame_node.py").exists()

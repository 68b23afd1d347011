"""The code blocks of README.md, CONTRIBUTING.md and docs/*.md, with the marker that says how each
one is checked (test/test_docs.py checks the markers, test/test_docs_run.py runs the blocks).

A command block (``bash``, ``sh``, ``shell``, ``console``) or a ``python`` block is preceded by
one marker comment on the line before its fence (blank lines between are allowed):

    <!-- runnable -->                 run by test/test_docs_run.py exactly as written
    <!-- runnable: slow -->           the same, marked slow_docs (tens of seconds: the demos)
    <!-- needs: REASON[, REASON] -->  cannot run on a CI machine; REASON is one of NEEDS

Every other fenced block (output, JSON, XML, a file tree) has a language too (``text`` for
output), so that an unmarked command cannot hide in a block without one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
COMMAND_LANGUAGES = {"bash", "sh", "shell", "console"}
MARKED_LANGUAGES = COMMAND_LANGUAGES | {"python"}

# Why a block cannot run in CI; the words after "needs:" in a marker.
NEEDS = {
    "GPU": "an NVIDIA GPU with CUDA",
    "ros2 CLI": "a ROS 2 installation (apt or a sourced colcon workspace): ros2, launch, colcon",
    "network": "downloads from the internet (git clone, pip from an index, model weights)",
    "model endpoint": "an OpenAI-compatible model server (vLLM, OpenAI, Gemini, ...)",
    "SAM 3 weights": "the gated SAM 3 checkpoint",
    "camera": "a camera driver publishing images",
    "running node": "a sam3_agent_node started beforehand (docs/ros.md runs one end to end)",
    "your files": "files of your own (a params file, a bag, an image, a dataset)",
    "root": "root rights (apt, tcpdump)",
    "Ctrl-C": "it runs until stopped",
    "minutes": "it takes minutes (the whole test suite, regenerating data, benchmarks); CI runs "
               "it by other means",
    "Jetson": "an NVIDIA Jetson",
}

_FENCE = re.compile(r"^(?P<indent>[ ]{0,3})(?P<fence>`{3,}|~{3,})(?P<info>[^`]*)$")
_MARKER = re.compile(r"^\s*<!--\s*(?P<kind>runnable|needs:)(?P<rest>[^>]*?)\s*-->\s*$")
_SLOW = re.compile(r"^:\s*slow$")


def doc_files() -> list[Path]:
    return [REPO_ROOT / "README.md", REPO_ROOT / "CONTRIBUTING.md",
            *sorted((REPO_ROOT / "docs").glob("*.md"))]


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # 1-based line of the opening fence
    language: str  # the first word of the info string ('' when none)
    code: str  # the block's text, dedented by the fence's indentation
    marker: str | None  # "runnable", "runnable: slow", "needs: ...", or None
    marker_error: str | None = None  # a marker comment that does not parse

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(REPO_ROOT)}:{self.line}"

    @property
    def runnable(self) -> bool:
        return self.marker in ("runnable", "runnable: slow")

    @property
    def slow(self) -> bool:
        return self.marker == "runnable: slow"

    @property
    def needs(self) -> list[str]:
        if not self.marker or not self.marker.startswith("needs:"):
            return []
        return [n.strip() for n in self.marker.removeprefix("needs:").split(",") if n.strip()]


def _marker_before(lines: list[str], index: int) -> tuple[str | None, str | None]:
    """The marker on the nearest non-blank line above ``index``, or (None, error)."""
    for previous in range(index - 1, -1, -1):
        text = lines[previous].strip()
        if not text:
            continue
        if not text.startswith("<!--"):
            return None, None
        match = _MARKER.match(text)
        if not match:
            return None, f"unknown marker comment {text!r}"
        if match["kind"] == "runnable":
            rest = match["rest"].strip()
            if rest and not _SLOW.match(rest):
                return None, f"'runnable' takes nothing or ': slow' after it: {text!r}"
            return ("runnable: slow" if rest else "runnable"), None
        return "needs: " + match["rest"].strip(), None
    return None, None


def blocks(path: Path) -> list[Block]:
    """Every fenced block of one Markdown file."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        fence, indent = opening["fence"], len(opening["indent"])
        body: list[str] = []
        end = index + 1
        while end < len(lines):
            closing = _FENCE.match(lines[end])
            if closing and closing["fence"][0] == fence[0] and len(closing["fence"]) >= \
                    len(fence) and not closing["info"].strip():
                break
            body.append(lines[end][indent:] if lines[end][:indent].strip() == "" else lines[end])
            end += 1
        marker, error = _marker_before(lines, index)
        info = opening["info"].strip()
        found.append(Block(path, index + 1, info.split()[0] if info else "", "\n".join(body),
                           marker, error))
        index = end + 1
    return found


def indented_code_lines(path: Path) -> list[int]:
    """Lines that Markdown would render as an indented code block (4+ spaces after a blank line,
    outside fences and lists): a command there would escape the markers."""
    lines = path.read_text(encoding="utf-8").splitlines()
    fenced, in_list, hits = False, False, []
    for number, line in enumerate(lines, 1):
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if fenced or not line.strip():
            continue
        stripped = line.lstrip()
        indent = len(line) - len(stripped)
        if indent == 0:
            in_list = bool(re.match(r"([-*+]|\d+[.)])\s", stripped))
            continue
        previous = lines[number - 2] if number >= 2 else ""
        if indent >= 4 and not previous.strip() and not in_list:
            hits.append(number)
    return hits


def all_blocks() -> list[Block]:
    return [block for path in doc_files() for block in blocks(path)]

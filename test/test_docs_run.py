"""Every block marked ``<!-- runnable -->`` in README.md, CONTRIBUTING.md and docs/*.md runs as
written (test/docs_blocks.py), the way the docs tell a reader to run it: from the repository
root, with the venv active (its ``bin`` first on PATH), in the DDS environment of this test
session (loopback, test/conftest.py). ``out/`` in a command is redirected to a temporary folder
so the checkout stays clean (``make demo`` writes its own ``out/demo``). A block runs with
``bash -e -o pipefail`` (python blocks with the venv's python) in a process group of its own,
which is ended afterwards whatever happened, so background jobs of a failed block never
outlive it. Identical blocks (the same commands in two files) run once.

Also checked here: the figures the docs quote from a run of the offline backends on the shipped
evaluation sets are what ``sam3-agent eval`` measures now.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from test.docs_blocks import REPO_ROOT, all_blocks

VENV = REPO_ROOT / ".venv"
BLOCK_TIMEOUT_S = 240  # generous: a loaded 2-core machine; the blocks take seconds
OUT_WORD = re.compile(r"(?<=[\s=(\"'])out(?=/|\s|$)")

pytestmark = pytest.mark.skipif(
    Path(sys.prefix).resolve() != VENV.resolve(),
    reason="the docs' commands are written for .venv (this is another venv)")


def _code_key(code: str) -> str:
    """The commands of a block without comments and spacing (to run duplicates once)."""
    lines = [re.sub(r"\s+#.*$", "", line).strip() for line in code.splitlines()]
    return "\n".join(line for line in lines if line and not line.startswith("#"))


def _runnable_blocks() -> list:
    seen, unique = set(), []
    for block in all_blocks():
        if block.runnable and _code_key(block.code) not in seen:
            seen.add(_code_key(block.code))
            marks = [pytest.mark.slow_docs] if block.slow else []
            unique.append(pytest.param(block, id=block.where, marks=marks))
    return unique


def redirect_out(code: str, out_root: Path) -> str:
    """``out/x`` and a bare ``out`` argument -> ``<out_root>/out/x``."""
    return OUT_WORD.sub(str(out_root / "out"), code)


def _env() -> dict[str, str]:
    env = dict(os.environ)  # the loopback DDS environment of the session
    env["PATH"] = os.pathsep.join([str(VENV / "bin"), env.get("PATH", "")])
    env["VIRTUAL_ENV"] = str(VENV)
    env.pop("_ROS_WHEELS_BOOTSTRAP_COMPLETE", None)  # each python bootstraps itself
    env.pop("PYTHONPATH", None)  # the venv's editable install, as for a reader
    return env


def run_block(language: str, code: str) -> subprocess.CompletedProcess:
    command = ["bash", "-e", "-o", "pipefail", "-c", code] if language != "python" \
        else [str(VENV / "bin" / "python"), "-c", code]
    process = subprocess.Popen(command, cwd=REPO_ROOT, env=_env(), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=BLOCK_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        _end_group(process.pid)
        stdout, stderr = process.communicate()
        stderr += f"\n[timed out after {BLOCK_TIMEOUT_S} s]"
    finally:
        _end_group(process.pid)
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


def _end_group(group: int, grace_s: float = 10.0) -> None:
    """SIGINT to whatever the block left running (nodes shut down cleanly), SIGKILL to what is
    still there after ``grace_s``."""
    try:
        os.killpg(group, signal.SIGINT)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    try:
        os.killpg(group, signal.SIGKILL)
    except ProcessLookupError:
        pass


@pytest.mark.parametrize("block", _runnable_blocks())
def test_runnable_block_runs_as_written(block, tmp_path):
    code = redirect_out(block.code, tmp_path)
    completed = run_block(block.language, code)
    assert completed.returncode == 0, (
        f"{block.where} failed ({completed.returncode}):\n{code}\n--- stdout\n"
        f"{completed.stdout[-4000:]}\n--- stderr\n{completed.stderr[-4000:]}")


def test_out_is_redirected_and_nothing_else():
    code = "mkdir -p out\nsam3-agent run --out out/cli > out/x.json\ncat 'out/a'\n" \
           "echo stdout layout --out about"
    assert redirect_out(code, Path("/t")) == (
        "mkdir -p /t/out\nsam3-agent run --out /t/out/cli > /t/out/x.json\ncat '/t/out/a'\n"
        "echo stdout layout --out about")


def _eval(dataset: str, out: Path) -> dict:
    completed = subprocess.run(
        [str(VENV / "bin" / "sam3-agent"), "eval", "--dataset", dataset, "-p",
         "llm.backend:=offline", "-p", "segmenter.backend:=color", "--out", str(out)],
        cwd=REPO_ROOT, env=_env(), capture_output=True, text=True, timeout=BLOCK_TIMEOUT_S)
    assert completed.returncode == 0, completed.stderr
    return json.loads((out / "summary.json").read_text())


def test_eval_figures_quoted_in_the_docs_are_measured(tmp_path):
    """README.md and docs/eval.md quote the offline backends' scores on the shipped sets."""
    tabletop = _eval("data/eval_tabletop", tmp_path / "tabletop")
    mini = _eval("data/eval_reasonseg_mini", tmp_path / "mini")
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    assert f"the offline backends score gIoU {tabletop['giou']:.2f} on it" in readme
    eval_doc = (REPO_ROOT / "docs" / "eval.md").read_text(encoding="utf-8")
    absent_right = round(tabletop["no_target_accuracy"] * tabletop["n_absent"])
    row = (f"| eval_tabletop ({tabletop['n']}) | {tabletop['giou']:.3f} | {tabletop['ciou']:.3f} "
           f"| {tabletop['no_target_accuracy']:.3f} ({absent_right} of {tabletop['n_absent']}) |")
    assert row in eval_doc
    assert (f"| eval_reasonseg_mini ({mini['n']}) | {mini['giou']:.3f} | {mini['ciou']:.3f} |"
            in eval_doc)

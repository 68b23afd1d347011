"""``--out`` of ``sam3-agent run`` and ``concepts`` (``record``: test/bags/test_record.py): a
folder that cannot be made is a usage error before the query runs; a write that fails afterwards
still prints the result JSON, and says on stderr what could not be written."""

from __future__ import annotations

import json
import os

import pytest

from test.fakes.segmenters import BREAK_OUT_VARIABLE
from test.test_cli import EXAMPLE, OFFLINE, sam3_agent

BREAKER = ["-p", "llm.backend:=offline",
           "-p", "segmenter.backend:=test.fakes.segmenters:out_breaking_factory"]
COMMANDS = {
    "run": ["run", "--image", str(EXAMPLE), "--query", "the leftmost blue object"],
    "concepts": ["concepts", "--image", str(EXAMPLE), "--concepts", "blue object"],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_an_out_that_cannot_be_created_is_refused_before_the_query(tmp_path, command):
    (tmp_path / "file").write_text("x")
    out = tmp_path / "file" / "out"
    proc = sam3_agent(*COMMANDS[command], *OFFLINE, "--out", str(out))
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and str(out) in lines[0] and "Not a directory" in lines[0], lines


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_write_failing_after_the_query_still_prints_the_result(tmp_path, command):
    out = tmp_path / "out"
    env = dict(os.environ, **{BREAK_OUT_VARIABLE: str(out)})
    proc = sam3_agent(*COMMANDS[command], *BREAKER, "--out", str(out), env=env)
    assert out.is_file()  # the segmenter did put a file in its place
    answer = json.loads(proc.stdout)  # the answer is not lost
    assert answer["status" if command == "run" else "detections"]
    assert proc.returncode == 1
    assert f"could not write --out {out}" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_directory_as_image_says_it_is_a_directory(tmp_path, command):
    args = list(COMMANDS[command])
    args[args.index("--image") + 1] = str(tmp_path)
    proc = sam3_agent(*args, *OFFLINE)
    assert proc.returncode == 2 and "is a directory" in proc.stderr, proc.stderr

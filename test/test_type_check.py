"""The package type-checks (mypy, [tool.mypy] in pyproject.toml, also run by `make lint`): the
whole package clean, strict on core/ and pipeline/."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
MYPY = shutil.which("mypy", path=str(Path(sys.executable).parent))

needs_mypy = pytest.mark.skipif(MYPY is None, reason="mypy not installed (requirements/dev.txt)")


def _mypy(*args: str, cwd: Path = REPO_ROOT) -> subprocess.CompletedProcess[str]:
    assert MYPY is not None
    return subprocess.run([MYPY, *args], cwd=cwd, capture_output=True, text=True, timeout=600)


@needs_mypy
def test_the_package_type_checks():
    completed = _mypy()
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert "Success: no issues found" in completed.stdout


@needs_mypy
def test_core_is_checked_strictly(tmp_path):
    """An unannotated function in core/ is an error there, and only there."""
    package = tmp_path / "sam3_agent_ros"
    for folder in (package / "core", package / "eval"):
        folder.mkdir(parents=True)
        (folder / "__init__.py").write_text("")
        (folder / "loose.py").write_text("def twice(value):\n    return 2 * value\n")
    (package / "__init__.py").write_text("")
    (tmp_path / "pyproject.toml").write_text((REPO_ROOT / "pyproject.toml").read_text())
    completed = _mypy("--cache-dir", str(tmp_path / "cache"), cwd=tmp_path)
    assert completed.returncode == 1, completed.stdout + completed.stderr
    assert "sam3_agent_ros/core/loose.py:1: error: Function is missing a type annotation" \
        in completed.stdout
    assert "eval/loose.py" not in completed.stdout

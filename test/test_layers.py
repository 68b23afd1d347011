"""The layers of the package hold (import-linter's contracts in pyproject.toml, also run by
`make lint`): no module imports from a layer above its own, lazy imports included; no cycle."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = shutil.which("lint-imports", path=str(Path(sys.executable).parent))


@pytest.mark.skipif(LINT_IMPORTS is None, reason="import-linter not installed "
                                                 "(requirements/dev.txt)")
def test_the_import_contracts_are_kept():
    completed = subprocess.run([LINT_IMPORTS, "--no-cache"], cwd=REPO_ROOT, capture_output=True,
                               text=True, timeout=300)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert "0 broken" in completed.stdout

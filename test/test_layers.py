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


def _imported_modules(path: Path) -> set[str]:
    import ast

    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


def test_the_deployed_package_never_imports_the_demo_package():
    """What a robot deploys (sam3_agent_ros) runs without demo/ (sam3_agent_demo): only cli.py
    imports it, lazily, for ``sam3-agent demo`` (import-linter's no-demo-in-deployed, here also
    where import-linter is not installed)."""
    importers = sorted(
        str(path.relative_to(REPO_ROOT)) for path in (REPO_ROOT / "sam3_agent_ros").rglob("*.py")
        if any(name.split(".")[0] == "sam3_agent_demo" for name in _imported_modules(path)))
    assert importers == ["sam3_agent_ros/cli.py"]

"""Which heavy dependencies (ROS 2, torch) a test file needs, read from its imports.

The ROS-free venvs (``.venv-py310``, ``.venv-py313``; scripts/setup_extra_venv.sh) have neither
rclpy nor torch. ``pytest --ros-free`` (test/conftest.py) collects only the test files that need
neither, so a new ROS-free test anywhere under test/ runs there without being listed, and a test
that imports the node or SAM 3 is left out without being listed either.

A test file needs what all its own imports need (inside test functions too: they run) and,
transitively, what the modules of this package and of test/ that it imports need when imported:
for those only import-time imports count (module level, ``if``/``try`` blocks and class bodies;
not function bodies, not ``if TYPE_CHECKING:``), since the package imports torch and rclpy lazily
on purpose. A helper that imports them lazily and is called by a test is not recognised: that
test fails loudly in the ROS-free run (ModuleNotFoundError) and should import what it needs itself.

No module is imported here: the files are parsed with ``ast``.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
FIRST_PARTY = ("sam3_agent_ros", "sam3_agent_demo", "test")
# Where a first-party top-level package lives, relative to the repository root (the demo package
# is a package of its own in demo/: demo/setup.py).
_FIRST_PARTY_DIRS = {"sam3_agent_demo": ("demo",)}

ROS = "ros"
TORCH = "torch"

# Top-level module names that come from ROS 2 (wheels or apt) or its bag tooling.
_ROS_MODULES = frozenset({
    "rclpy", "rcl_interfaces", "ament_index_python", "launch", "launch_ros", "launch_testing",
    "rosbags", "rosidl_runtime_py", "rosidl_parser", "builtin_interfaces", "unique_identifier_msgs",
    "tf2_ros", "cv_bridge", "message_filters",
})
# Interface packages follow ROS naming: std_msgs, std_srvs, example_interfaces, ...
_ROS_SUFFIXES = ("_msgs", "_srvs", "_interfaces")
_TORCH_MODULES = frozenset({
    "torch", "torchvision", "sam3", "timm", "open_clip", "triton", "huggingface_hub",
    "safetensors",
})


def classify(module: str) -> str | None:
    """``ROS``, ``TORCH`` or None for a dotted module name."""
    top = module.split(".", 1)[0]
    if top in _ROS_MODULES or top.endswith(_ROS_SUFFIXES):
        return ROS
    if top in _TORCH_MODULES:
        return TORCH
    return None


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imported_names(node: ast.Import | ast.ImportFrom, package: str) -> list[str]:
    """Dotted names one import statement imports (``package`` resolves relative imports).

    ``from a.b import c`` yields both ``a.b`` and ``a.b.c`` (c may be a submodule).
    """
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        parts = package.split(".")
        parts = parts[: len(parts) - (node.level - 1)]
        base = ".".join(p for p in (*parts, base) if p)
    return [base] + [f"{base}.{alias.name}" for alias in node.names if alias.name != "*"]


def all_imports(tree: ast.Module, package: str) -> list[str]:
    """Every dotted name the module may import, wherever the import statement is."""
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.extend(_imported_names(node, package))
    return found


def import_time_imports(tree: ast.Module, package: str) -> list[str]:
    """Dotted names imported when the module runs (not those inside functions)."""
    found: list[str] = []

    def visit(statements: list[ast.stmt]) -> None:
        for node in statements:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                found.extend(_imported_names(node, package))
            elif isinstance(node, ast.If):
                if not _is_type_checking(node.test):
                    visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)
                for handler in node.handlers:
                    visit(handler.body)
                visit(node.orelse)
                visit(node.finalbody)
            elif isinstance(node, (ast.With, ast.ClassDef)):
                visit(node.body)

    visit(tree.body)
    return found


def module_file(module: str, root: Path = REPO_ROOT) -> Path | None:
    """The source file of a first-party module (package ``__init__.py`` or module file)."""
    top = module.split(".", 1)[0]
    if top not in FIRST_PARTY:
        return None
    base = root.joinpath(*_FIRST_PARTY_DIRS.get(top, ()), *module.split("."))
    for candidate in (base / "__init__.py", base.with_suffix(".py")):
        if candidate.is_file():
            return candidate
    return None


def _package_of(path: Path, root: Path) -> str:
    """The package a module file belongs to (for relative imports): a/b/c.py and a/b/__init__.py
    are both in ``a.b``."""
    if not path.is_relative_to(root):  # outside the repository: no first-party package
        return ""
    parts = path.relative_to(root).parts[:-1]
    for top, folder in _FIRST_PARTY_DIRS.items():
        if parts[:len(folder) + 1] == (*folder, top):
            parts = parts[len(folder):]
    return ".".join(parts)


@cache
def _direct(path: Path, root: Path, everywhere: bool) -> tuple[frozenset[str], tuple[Path, ...]]:
    """The heavy dependencies a file imports itself, and the first-party files it imports
    (``everywhere``: imports inside functions too)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    scan = all_imports if everywhere else import_time_imports
    kinds: set[str] = set()
    files: list[Path] = []
    for module in scan(tree, _package_of(path, root)):
        kind = classify(module)
        if kind is not None:
            kinds.add(kind)
            continue
        # Importing a.b.c runs a/__init__.py and a/b/__init__.py too.
        parts = module.split(".")
        for depth in range(1, len(parts) + 1):
            source = module_file(".".join(parts[:depth]), root)
            if source is not None:
                files.append(source.resolve())
    return frozenset(kinds), tuple(files)


def needs(path: Path, root: Path = REPO_ROOT) -> frozenset[str]:
    """The heavy dependencies (``ROS``, ``TORCH``) the test file at ``path`` needs: its own
    imports anywhere in it, and what the first-party modules they reach import when imported."""
    root = root.resolve()
    start = path.resolve()
    found: set[str] = set()
    seen: set[Path] = set()
    pending = [start]
    while pending:
        current = pending.pop()
        if current in seen:
            continue
        seen.add(current)
        kinds, files = _direct(current, root, current == start)
        found |= kinds
        pending.extend(files)
    return frozenset(found)

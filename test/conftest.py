"""Shared fixtures: the repository root and the loopback-only DDS environment.

The loopback environment (sam3_agent_ros.ros.dds, on a domain id reserved by
sam3_agent_demo.domains) is applied to os.environ when this file is imported, i.e. before any
test module imports rclpy: every participant created by a test, in this process or in a
subprocess that inherits the environment, stays on this host, on a domain id reserved once per
test session (no other run on this host has it). Markers are registered in pyproject.toml;
tests under test/ros/, test/bags/ and test/graph/ get the `ros` marker automatically, and so
does any test whose module imports ROS 2 (`torch` likewise for torch/SAM 3; test/heavy_imports.py
reads the imports). Those tests are refused, in one line, when the imported ``sam3_agent_ros`` is
not this checkout's (a shared venv's editable install of another clone): its live node would be
tested instead. `pytest --ros-free` (the Python 3.10/3.13 venvs, without rclpy and torch)
does not even collect those files. test/demo/ is judged file by file: the demo runs reach ROS 2
through their imports, while the synthetic scenes and the scoring are ROS-free and run in those
venvs too.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sam3_agent_demo.domains import apply_reserved_loopback_env
from sam3_agent_ros.ros.dds import DOMAIN_ID_VAR, PROFILES_FILE_VARS
from test import heavy_imports

REPO_ROOT = Path(__file__).resolve().parents[1]

# The suite's DDS, whatever the shell exported: loopback only, on a domain id that no other run on
# this host holds (sam3_agent_demo.domains.reserve_domain_id). An exported ROS_DOMAIN_ID shared
# with another clone's suite, CI or a robot would let their nodes (same names, same topics)
# answer ours; an exported Fast DDS profile may send multicast out of the machine.
for _name in (DOMAIN_ID_VAR, *PROFILES_FILE_VARS):
    os.environ.pop(_name, None)
_SESSION_ROS_ENV = apply_reserved_loopback_env()

_ROS_TEST_DIRS = ("ros", "bags", "graph")


def find_repo_root(start: Path | None = None) -> Path:
    """The nearest directory at or above `start` holding package.xml and setup.py."""
    here = (start or Path(__file__)).resolve()
    for candidate in (here, *here.parents):
        if (candidate / "package.xml").is_file() and (candidate / "setup.py").is_file():
            return candidate
    raise FileNotFoundError(f"no repository root (package.xml + setup.py) above {here}")


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def png_bomb_file(tmp_path_factory) -> Path:
    """A ~390 kB PNG declaring 20000x20000 (test/fakes/image_bombs.py), built once a session."""
    from test.fakes.image_bombs import png_bomb

    path = tmp_path_factory.mktemp("bombs") / "bomb_20000x20000.png"
    path.write_bytes(png_bomb(20_000, 20_000))
    return path


@pytest.fixture(scope="session")
def ros_env() -> dict[str, str]:
    """The DDS variables of this session (also set in os.environ): pass them to subprocesses."""
    return dict(_SESSION_ROS_ENV)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--ros-free", action="store_true",
        help="collect only tests that need neither ROS 2 nor torch: skips test/ros, test/bags "
             "and every test file whose imports reach rclpy, ROS messages, torch or SAM 3 "
             "(the ROS-free venvs .venv-py310 / .venv-py313)")


def _needs_ros(path: Path) -> bool:
    """Under test/ros or test/bags, or a Python file whose imports reach ROS 2."""
    test_root = REPO_ROOT / "test"
    parts = path.relative_to(test_root).parts if path.is_relative_to(test_root) else ()
    if parts and parts[0] in _ROS_TEST_DIRS:
        return True
    return path.suffix == ".py" and heavy_imports.ROS in heavy_imports.needs(path)


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    if not config.getoption("--ros-free"):
        return None
    path = collection_path.resolve()
    if _needs_ros(path):
        return True
    if path.suffix == ".py" and heavy_imports.TORCH in heavy_imports.needs(path):
        return True
    return None


def foreign_package() -> Path | None:
    """Where a process started by the tests (a live node) imports ``sam3_agent_ros`` from when
    it is not this checkout (a shared venv's editable install of another clone, without
    ``PYTHONPATH``), else None. This process may differ: pytest puts the checkout first."""
    found = subprocess.run(
        [sys.executable, "-c", "import sam3_agent_ros; print(sam3_agent_ros.__file__)"],
        capture_output=True, text=True, cwd="/", env=os.environ, timeout=60, check=False)
    if found.returncode != 0:
        return None  # no package at all: the tests say so themselves
    package = Path(found.stdout.strip()).resolve().parent
    return None if package.is_relative_to(REPO_ROOT) else package


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    test_root = REPO_ROOT / "test"
    paths = [Path(str(item.path)).resolve() for item in items]
    live = any(path.is_relative_to(test_root) and _needs_ros(path) for path in paths)
    if live and (foreign := foreign_package()) is not None:
        raise pytest.UsageError(  # the live node would run the other checkout's code
            f"sam3_agent_ros is imported from {foreign}, not this checkout: run with "
            f"PYTHONPATH={REPO_ROOT} for the live-node tests")
    for item in items:
        path = Path(str(item.path)).resolve()
        if not path.is_relative_to(test_root):
            continue
        if heavy_imports.TORCH in heavy_imports.needs(path):
            item.add_marker(pytest.mark.torch)
        if _needs_ros(path):
            item.add_marker(pytest.mark.ros)
            # Discovery and delivery over DDS depend on the load of a shared 2-core machine:
            # a ROS test that times out once is run again (a real failure fails every time).
            item.add_marker(pytest.mark.flaky(reruns=2, reruns_delay=2))
    if config.getoption("--ros-free"):  # also a test marked `ros` by hand (it starts a ROS
        # process its imports do not show, e.g. `sam3-agent demo` in a subprocess)
        ros_free = [item for item in items if item.get_closest_marker("ros") is None]
        if len(ros_free) < len(items):
            config.hook.pytest_deselected(items=[i for i in items if i not in ros_free])
            items[:] = ros_free


def pytest_report_header(config: pytest.Config) -> str:
    return "dds: " + ", ".join(f"{key}={value}" for key, value in _SESSION_ROS_ENV.items())

"""Shared fixtures: the repository root and the loopback-only DDS environment.

The loopback environment (sam3_agent_ros.ros.dds) is applied to os.environ when this file is
imported, i.e. before any test module imports rclpy: every participant created by a test, in this
process or in a subprocess that inherits the environment, stays on this host, on a domain id drawn
once per test session. Markers are registered in pyproject.toml; tests under test/ros/ and
test/bags/ get the `ros` marker automatically.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sam3_agent_ros.ros.dds import apply_loopback_env

REPO_ROOT = Path(__file__).resolve().parents[1]

_SESSION_ROS_ENV = apply_loopback_env()

_ROS_TEST_DIRS = ("ros", "bags")


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
def ros_env() -> dict[str, str]:
    """The DDS variables of this session (also set in os.environ): pass them to subprocesses."""
    return dict(_SESSION_ROS_ENV)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    test_root = REPO_ROOT / "test"
    for item in items:
        path = Path(str(item.path)).resolve()
        if not path.is_relative_to(test_root):
            continue
        if path.relative_to(test_root).parts[0] in _ROS_TEST_DIRS:
            item.add_marker(pytest.mark.ros)
            # Discovery and delivery over DDS depend on the load of a shared 2-core machine:
            # a ROS test that times out once is run again (a real failure fails every time).
            item.add_marker(pytest.mark.flaky(reruns=2, reruns_delay=2))


def pytest_report_header(config: pytest.Config) -> str:
    return "dds: " + ", ".join(f"{key}={value}" for key, value in _SESSION_ROS_ENV.items())

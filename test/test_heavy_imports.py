"""test/heavy_imports.py and `pytest --ros-free` (test/conftest.py): which test files need ROS 2 or
torch, read from their imports, and the ROS-free selection built on it."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from test import heavy_imports
from test.heavy_imports import ROS, TORCH, classify, needs

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("module, kind", [
    ("rclpy", ROS), ("rclpy.executors", ROS), ("std_msgs.msg", ROS), ("std_srvs.srv", ROS),
    ("sam3_agent_ros_interfaces.action", ROS), ("rosbags.rosbag2", ROS),
    ("torch", TORCH), ("torch.nn.functional", TORCH), ("sam3.model_builder", TORCH),
    ("numpy", None), ("cv2", None), ("openai", None), ("sam3_agent_ros.ros.dds", None),
    ("test.fakes.segmenters", None),
])
def test_classify(module, kind):
    assert classify(module) == kind


def _tree(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


@pytest.fixture
def project(tmp_path):
    _tree(tmp_path, {
        "sam3_agent_ros/__init__.py": "",
        "sam3_agent_ros/eager.py": "import rclpy\n",
        "sam3_agent_ros/lazy.py": "def load():\n    import torch\n",
        "sam3_agent_ros/typed.py": """\
            from typing import TYPE_CHECKING
            if TYPE_CHECKING:
                import rclpy
            """,
        "sam3_agent_ros/sub/__init__.py": "from .. import eager\n",
        "sam3_agent_ros/cycle_a.py": "from sam3_agent_ros import cycle_b\n",
        "sam3_agent_ros/cycle_b.py": "from sam3_agent_ros import cycle_a\nimport numpy\n",
        "sam3_agent_ros/guarded.py": """\
            try:
                import torch
            except ImportError:
                torch = None
            """,
        "demo/sam3_agent_demo/__init__.py": "",
        "demo/sam3_agent_demo/eager.py": "from . import lazy\nimport rclpy\n",
        "demo/sam3_agent_demo/lazy.py": "def load():\n    import rclpy\n",
        "test/__init__.py": "",
        "test/test_demo_eager.py": "from sam3_agent_demo import eager\n",
        "test/test_demo_lazy.py": "import sam3_agent_demo.lazy\n",
        "test/test_eager.py": "from sam3_agent_ros.eager import *\n",
        "test/test_lazy.py": "from sam3_agent_ros import lazy\n",
        "test/test_typed.py": "import sam3_agent_ros.typed\n",
        "test/test_sub.py": "import sam3_agent_ros.sub.anything\n",
        "test/test_cycle.py": "from sam3_agent_ros import cycle_a\n",
        "test/test_guarded.py": "from sam3_agent_ros import guarded\n",
        "test/test_own_lazy_import.py": "def test_x():\n    import torch\n",
    })
    return tmp_path


@pytest.mark.parametrize("test_file, expected", [
    ("test_eager.py", {ROS}),            # through a first-party module, at import time
    ("test_lazy.py", set()),             # the package's lazy imports do not count...
    ("test_own_lazy_import.py", {TORCH}),  # ...the test file's own do: its functions run
    ("test_typed.py", set()),            # TYPE_CHECKING blocks never run
    ("test_sub.py", {ROS}),              # a package's __init__ runs, relative imports resolve
    ("test_cycle.py", set()),            # import cycles end
    ("test_guarded.py", {TORCH}),        # a guarded import still counts
    ("test_demo_eager.py", {ROS}),       # the demo package (demo/sam3_agent_demo) is followed
    ("test_demo_lazy.py", set()),        # ...with its lazy imports left out like the package's
])
def test_needs(project, test_file, expected):
    assert needs(project / "test" / test_file, root=project) == expected


def test_this_repository():
    assert ROS in needs(REPO_ROOT / "test" / "ros" / "helpers.py")
    assert needs(REPO_ROOT / "test" / "core" / "test_agent.py") == set()
    assert needs(Path(heavy_imports.__file__)) == set()


def test_ros_free_collection_leaves_out_ros_and_torch_tests():
    completed = subprocess.run(
        [sys.executable, "-m", "pytest", "--ros-free", "--collect-only", "-q",
         "-p", "no:cacheprovider", "test"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    files = {line.split("::", 1)[0] for line in completed.stdout.splitlines() if "::" in line}
    assert "test/core/test_agent.py" in files and "test/test_cli.py" in files
    assert not [f for f in files if f.startswith(("test/ros/", "test/bags/"))]
    heavy = [f for f in files if needs(REPO_ROOT / f)]
    assert heavy == [], "collected although they import ROS 2 or torch"


def test_a_file_outside_the_repository_is_read_without_its_package(tmp_path):
    outside = tmp_path / "elsewhere" / "test_outside.py"
    outside.parent.mkdir()
    outside.write_text("from . import sibling\nimport rclpy\n")
    (tmp_path / "repo").mkdir()
    assert needs(outside, root=tmp_path / "repo") == {ROS}

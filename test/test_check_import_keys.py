"""scripts/check_import_keys.py: every third-party import of the installed code has its rosdep
key in package.xml (issue 34: transforms3d and aiohttp had none, so a colcon install died at
start-up with ModuleNotFoundError)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location(
    "check_import_keys", REPO_ROOT / "scripts" / "check_import_keys.py")
check = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check)

PACKAGE_XML = """<?xml version="1.0"?>
<package format="3">
  <name>demo_pkg</name>
  <depend>std_msgs</depend>
  <exec_depend>rclpy</exec_depend>
  <exec_depend>python3-numpy</exec_depend>
  <test_depend>python3-yaml</test_depend>
</package>
"""


def test_every_import_of_the_package_has_its_key_in_package_xml():
    imports = check.third_party_imports(REPO_ROOT)
    assert {"rclpy", "numpy", "transforms3d", "aiohttp", "launch_ros"} <= set(imports)
    assert check.problems(imports, check.runtime_keys(REPO_ROOT / "package.xml")) == []


def test_the_package_without_a_key_fails(tmp_path):
    """The package.xml of before (no python3-transforms3d, no python3-aiohttp) is caught."""
    for folder in check.SCANNED:
        (tmp_path / folder).symlink_to(REPO_ROOT / folder)
    text = (REPO_ROOT / "package.xml").read_text()
    for key in ("python3-transforms3d", "python3-aiohttp"):
        text = text.replace(f"<exec_depend>{key}</exec_depend>", "")
    (tmp_path / "package.xml").write_text(text)
    found = check.problems(check.third_party_imports(tmp_path),
                           check.runtime_keys(tmp_path / "package.xml"))
    assert len(found) == 2 and "import aiohttp" in found[0] and "import transforms3d" in found[1]
    assert check.main(["--root", str(tmp_path)]) == 1


def _tree(tmp_path: Path, code: str) -> Path:
    (tmp_path / "sam3_agent_ros").mkdir()
    (tmp_path / "launch").mkdir()
    (tmp_path / "sam3_agent_ros" / "mod.py").write_text(code)
    (tmp_path / "package.xml").write_text(PACKAGE_XML)
    return tmp_path


def test_lazy_and_from_imports_count_and_the_standard_library_and_the_package_do_not(tmp_path):
    root = _tree(tmp_path, "import os, json\nfrom . import sibling\n"
                           "from sam3_agent_ros.core import types\nimport numpy as np\n"
                           "from std_msgs.msg import String\n"
                           "def f():\n    import transforms3d.quaternions\n"
                           "    from somelib import thing\n")
    imports = check.third_party_imports(root)
    assert set(imports) == {"numpy", "std_msgs", "transforms3d", "somelib"}
    found = check.problems(imports, check.runtime_keys(root / "package.xml"))
    joined = "\n".join(found)
    assert "import somelib (sam3_agent_ros/mod.py): no rosdep key known" in joined
    assert "<exec_depend>python3-transforms3d</exec_depend>" in joined
    assert "numpy" not in joined.split("OPTIONAL")[0] and "std_msgs" not in joined


def test_a_test_only_key_is_not_a_runtime_key(tmp_path):
    root = _tree(tmp_path, "import yaml\n")
    found = check.problems(check.third_party_imports(root),
                           check.runtime_keys(root / "package.xml"))
    assert any("import yaml" in problem and "python3-yaml" in problem for problem in found)


def test_ros_modules_map_to_their_packages():
    assert check.rosdep_key("tf2_ros") == "tf2_ros_py"
    assert check.rosdep_key("vision_msgs") == "vision_msgs"
    assert check.rosdep_key("example_interfaces") == "example_interfaces"
    assert check.rosdep_key("cv2") == "python3-opencv"
    assert check.rosdep_key("left_pad") is None


def test_a_stale_optional_entry_is_reported(tmp_path):
    root = _tree(tmp_path, "import numpy\n")
    found = check.problems(check.third_party_imports(root),
                           check.runtime_keys(root / "package.xml"))
    assert any("OPTIONAL lists torch" in problem for problem in found)

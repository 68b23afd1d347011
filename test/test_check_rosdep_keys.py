"""scripts/check_rosdep_keys.py: package.xml keys resolved against a (here: miniature) rosdistro
checkout, the way `rosdep install` resolves them on Humble (jammy) and Jazzy/Kilted (noble)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location(
    "check_rosdep_keys", REPO_ROOT / "scripts" / "check_rosdep_keys.py")
check = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check)

PYTHON_YAML = """\
python3-numpy:
  debian: [python3-numpy]
  ubuntu: [python3-numpy]
python3-openai-pip:
  debian:
    pip:
      packages: [openai]
  ubuntu:
    '*':
      pip:
        packages: [openai]
    noble: [python3-openai]
python3-torch:
  ubuntu:
    '*': [python3-torch]
    jammy: null
"""
DISTRIBUTION_YAML = """\
repositories:
  rclpy:
    release:
      packages: [rclpy]
      version: {version}
  common_interfaces:
    release:
      packages: [std_msgs, sensor_msgs]
      version: {version}
  lonely_pkg:
    release:
      version: {version}
  source_only:
    source:
      type: git
"""


@pytest.fixture
def rosdistro(tmp_path):
    (tmp_path / "rosdep").mkdir()
    (tmp_path / "rosdep" / "python.yaml").write_text(PYTHON_YAML)
    (tmp_path / "rosdep" / "base.yaml").write_text("cmake:\n  ubuntu: [cmake]\n")
    for distro, version in (("humble", "3.3.0-1"), ("jazzy", "7.1.0-1"), ("kilted", "9.1.0-1")):
        (tmp_path / distro).mkdir()
        (tmp_path / distro / "distribution.yaml").write_text(
            DISTRIBUTION_YAML.format(version=version))
    return tmp_path


def _package_xml(tmp_path: Path, keys: list[str]) -> Path:
    path = tmp_path / "package.xml"
    depends = "\n".join(f"  <exec_depend>{key}</exec_depend>" for key in keys)
    path.write_text(f'<?xml version="1.0"?>\n<package format="3">\n  <name>probe</name>\n'
                    f"{depends}\n  <test_depend>cmake</test_depend>\n</package>\n")
    return path


def _resolve(rosdistro, key):
    rules = check.load_rosdep_rules(rosdistro)
    released = {d: check.released_packages(rosdistro, d) for d in check.DISTROS}
    return check.resolve(key, rules, released)


@pytest.mark.parametrize("key, expected", [
    ("python3-numpy", {"humble": "apt python3-numpy", "jazzy": "apt python3-numpy",
                       "kilted": "apt python3-numpy"}),
    ("python3-openai-pip", {"humble": "pip openai", "jazzy": "apt python3-openai",
                            "kilted": "apt python3-openai"}),
    ("python3-torch", {"humble": None, "jazzy": "apt python3-torch",
                       "kilted": "apt python3-torch"}),
    ("cmake", {"humble": "apt cmake", "jazzy": "apt cmake", "kilted": "apt cmake"}),
    ("std_msgs", {"humble": "ROS package 3.3.0-1", "jazzy": "ROS package 7.1.0-1",
                  "kilted": "ROS package 9.1.0-1"}),
    ("lonely_pkg", {"humble": "ROS package 3.3.0-1", "jazzy": "ROS package 7.1.0-1",
                    "kilted": "ROS package 9.1.0-1"}),
    ("source_only", {"humble": None, "jazzy": None, "kilted": None}),
    ("python3-openai", {"humble": None, "jazzy": None, "kilted": None}),
])
def test_resolve(rosdistro, key, expected):
    assert _resolve(rosdistro, key) == expected


def test_every_key_resolves_exit_0(rosdistro, tmp_path, capsys):
    package = _package_xml(tmp_path, ["rclpy", "std_msgs", "python3-openai-pip"])
    assert check.main([str(rosdistro), "--package-xml", str(package)]) == 0
    out = capsys.readouterr().out
    assert ("python3-openai-pip: humble (jammy): pip openai; "
            "jazzy (noble): apt python3-openai") in out


def test_an_unknown_key_fails_and_is_named(rosdistro, tmp_path, capsys):
    package = _package_xml(tmp_path, ["rclpy", "python3-openai"])
    assert check.main([str(rosdistro), "--package-xml", str(package)]) == 1
    assert "python3-openai on humble" in capsys.readouterr().err


def test_not_a_rosdistro_checkout_is_a_usage_error(tmp_path):
    with pytest.raises(SystemExit) as info:
        check.main([str(tmp_path)])
    assert info.value.code == 2


def test_keys_of_this_package_xml():
    keys = check.package_keys(REPO_ROOT / "package.xml")
    assert "python3-openai-pip" in keys and "rclpy" in keys
    assert "python3-openai" not in keys, "no such rosdep key: use python3-openai-pip"
    assert len(keys) == len(set(keys))

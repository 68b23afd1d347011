"""The extra venvs of `make test` (scripts/setup_extra_venv.sh): ROS 2 Jazzy on Python 3.12 and the
ROS-free package on Python 3.10 / 3.13, pinned by requirements/extra-venvs/constraints-*.txt.

These check the files that define them; the runs themselves are `make test-distros`.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
REQUIREMENTS = REPO_ROOT / "requirements"
EXTRA = REQUIREMENTS / "extra-venvs"
VENV_LISTS = {
    "py310": ["core.txt", "tests.txt"],
    "py313": ["core.txt", "tests.txt"],
    "jazzy": ["core.txt", "tests.txt", "jazzy.txt"],
}
# Kilted split ament_cmake_ros into ament_cmake_ros_core; Jazzy has only ament_cmake_ros.
KILTED_TO_JAZZY = {"ros-jazzy-ament-cmake-ros-core": "ros-jazzy-ament-cmake-ros"}


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _entries(path: Path) -> list[str]:
    lines = (line.split("#", 1)[0].strip() for line in path.read_text().splitlines())
    return [line for line in lines if line]


def _names(path: Path) -> set[str]:
    return {_norm(re.split(r"[<>=!~ ]", entry, maxsplit=1)[0]) for entry in _entries(path)}


def _pins(path: Path) -> dict[str, str]:
    pins = {}
    for entry in _entries(path):
        name, sep, version = entry.partition("==")
        assert sep and re.fullmatch(r"[\w.]+", version), f"{path.name}: not an exact pin: {entry}"
        pins[_norm(name)] = version
    return pins


@pytest.mark.parametrize("venv", sorted(VENV_LISTS))
def test_every_requirement_of_a_venv_is_pinned_by_its_constraints(venv):
    pins = _pins(EXTRA / f"constraints-{venv}.txt")
    wanted = set().union(*(_names(EXTRA / name) for name in VENV_LISTS[venv]))
    assert wanted - set(pins) == set(), f"run scripts/setup_extra_venv.sh {venv} --freeze"


def test_no_torch_in_the_extra_venvs():
    for venv in VENV_LISTS:
        pinned = set(_pins(EXTRA / f"constraints-{venv}.txt"))
        assert not pinned & {"torch", "torchvision", "sam3"}, venv


def test_jazzy_has_every_ros_wheel_the_main_venv_has():
    kilted = {n for n in _names(REQUIREMENTS / "base.txt") if n.startswith("ros-kilted-")}
    kilted |= {n for n in _names(REQUIREMENTS / "interfaces-kilted.txt")
               if n.startswith("ros-kilted-")}
    expected = {KILTED_TO_JAZZY.get(n.replace("ros-kilted-", "ros-jazzy-", 1),
                                    n.replace("ros-kilted-", "ros-jazzy-", 1)) for n in kilted}
    missing = expected - _names(EXTRA / "jazzy.txt")
    assert not missing, f"add to requirements/extra-venvs/jazzy.txt: {sorted(missing)}"


def test_jazzy_interface_pins_agree_with_the_jazzy_venv():
    # build_interfaces.sh installs interfaces-jazzy.txt into .venv-jazzy after the venv's own
    # install: a different version there would silently replace a pinned wheel.
    interfaces = _pins(REQUIREMENTS / "interfaces-jazzy.txt")
    venv = _pins(EXTRA / "constraints-jazzy.txt")
    assert {name: venv.get(name) for name in interfaces} == interfaces
    assert set(interfaces) <= _names(EXTRA / "jazzy.txt")


def test_the_python_310_pins_are_ones_that_exist_for_310():
    # numpy 2.3 and pillow 13 need Python 3.11+ (the main venv's pins).
    pins = _pins(EXTRA / "constraints-py310.txt")
    assert tuple(map(int, pins["numpy"].split(".")[:2])) < (2, 3)
    assert int(pins["pillow"].split(".")[0]) < 13


@pytest.mark.skipif(shutil.which("make") is None, reason="make not installed")
def test_make_test_runs_every_distro_and_python():
    completed = subprocess.run(["make", "-n", "test"], cwd=REPO_ROOT, capture_output=True,
                               text=True, timeout=60)
    assert completed.returncode == 0, completed.stderr
    commands = completed.stdout
    assert ".venv/bin/pytest" in commands
    assert '.venv-jazzy/bin/pytest -m "ros and not torch and not slow_sam3"' in commands
    assert ".venv-jazzy/bin/sam3-agent demo" in commands
    for venv in ("py310", "py313"):
        assert f".venv-{venv}/bin/pytest --ros-free" in commands
        assert f".venv-{venv}/bin/sam3-agent run " in commands
        assert f"scripts/setup_extra_venv.sh {venv}" in commands
    assert "scripts/setup_extra_venv.sh jazzy" in commands


@pytest.mark.parametrize("args", [[], ["py39"], ["jazzy", "--fast"]])
def test_setup_script_refuses_unknown_arguments(args):
    completed = subprocess.run(["bash", str(REPO_ROOT / "scripts" / "setup_extra_venv.sh"), *args],
                               capture_output=True, text=True, timeout=60)
    assert completed.returncode == 2
    assert "usage:" in completed.stderr

"""The package as users get it: ROS-free core, setup.py / package.xml / colcon install, the
console scripts of the venv, and the pinned requirements."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "sam3_agent_ros"
CONSOLE_SCRIPTS = ("sam3-agent", "sam3_agent_node")
# Subpackages allowed to import rclpy; everything else is the ROS-free core.
ROS_SUBPACKAGES = ("sam3_agent_ros.ros", "sam3_agent_ros.bags", "sam3_agent_demo")
# Pure-Python modules inside the ROS subpackages that must stay importable without rclpy.
ROS_FREE_EXCEPTIONS = ("sam3_agent_ros.ros.dds",
                       "sam3_agent_ros.ros.conversions",
                       "sam3_agent_ros.pipeline.follow_runner", "sam3_agent_ros.bags.commands",
                       "sam3_agent_demo.commands", "sam3_agent_demo.scene",
                       "sam3_agent_demo.moving_scene", "sam3_agent_ros.pipeline.concepts_runner",
                       "sam3_agent_demo.concepts_scoring")
# The core modules the architecture promises; a missing one is a failure, not a skip.
REQUIRED_MODULES = (
    "sam3_agent_ros.config",
    "sam3_agent_ros.core.agent",
    "sam3_agent_ros.llm.openai_client",
    "sam3_agent_ros.llm.offline",
    "sam3_agent_ros.segmenters",
    "sam3_agent_ros.segmenters.color",
    "sam3_agent_ros.render",
    "sam3_agent_ros.backends",
    "sam3_agent_ros.cli",
    "sam3_agent_ros.inputs",
    "sam3_agent_ros.run_command",
)
ROS_MODULE_PREFIXES = ("rclpy", "rcl_interfaces", "sensor_msgs", "std_msgs", "geometry_msgs",
                       "lifecycle_msgs", "rosidl_runtime_py")
REQUIRED_EXEC_DEPENDS = {"rclpy", "sensor_msgs", "std_msgs", "geometry_msgs", "lifecycle_msgs",
                         "python3-numpy", "python3-opencv", "python3-yaml", "python3-openai-pip"}


def _run_python(code: str, **kwargs) -> subprocess.CompletedProcess:
    """A fresh interpreter of this venv, in the repository root."""
    return subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=300, **kwargs)


def _core_module_names() -> list[str]:
    names = []
    for path in sorted((REPO_ROOT / PACKAGE).rglob("*.py")):
        parts = path.relative_to(REPO_ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        if name.startswith(ROS_SUBPACKAGES) and name not in ROS_FREE_EXCEPTIONS:
            continue
        names.append(name)
    return names


def _setup_py_distribution() -> dict:
    """The arguments setup.py passes to setup(), without building anything."""
    code = (
        "import json, runpy, setuptools\n"
        "arguments = {}\n"
        "setuptools.setup = lambda **kwargs: arguments.update(kwargs)\n"
        "runpy.run_path('setup.py')\n"
        "print(json.dumps({key: arguments[key] for key in"
        " ('version', 'data_files', 'entry_points', 'packages')}))\n"
    )
    completed = _run_python(code)
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout.strip().splitlines()[-1])


def _source_share_files() -> dict[str, list[str]]:
    return {
        "launch": sorted(p.name for p in (REPO_ROOT / "launch").glob("*.launch.py")),
        "config": sorted(p.name for p in (REPO_ROOT / "config").iterdir()
                         if p.suffix in (".yaml", ".xml", ".rviz")),
        "config/sros2": sorted(p.name for p in (REPO_ROOT / "config" / "sros2").glob("*.xml")),
        "prompts": sorted(p.name for p in (REPO_ROOT / "prompts").glob("*.md")),
    }


def test_required_core_modules_exist():
    names = set(_core_module_names())
    missing = [name for name in REQUIRED_MODULES if name not in names]
    assert not missing, f"core modules missing: {missing}"


def test_core_does_not_import_rclpy():
    modules = _core_module_names()
    code = (
        "import importlib, json, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        f"prefixes = {ROS_MODULE_PREFIXES!r}\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in prefixes)))\n"
    )
    completed = _run_python(code)
    assert completed.returncode == 0, completed.stderr
    ros_modules = json.loads(completed.stdout.strip().splitlines()[-1])
    assert ros_modules == [], f"importing the core imported ROS modules: {ros_modules[:10]}"


def test_setup_py_installs_share_files_and_marker():
    data_files = dict(_setup_py_distribution()["data_files"])
    assert data_files["share/ament_index/resource_index/packages"] == [f"resource/{PACKAGE}"]
    assert (REPO_ROOT / "resource" / PACKAGE).is_file()
    assert data_files[f"share/{PACKAGE}"] == ["package.xml"]
    for directory, names in _source_share_files().items():
        installed = data_files.get(f"share/{PACKAGE}/{directory}", [])
        assert sorted(Path(p).name for p in installed) == names, directory
    assert _source_share_files()["prompts"], "prompts/ holds the system and verifier prompts"


def test_the_deployed_package_carries_no_demo():
    """The synthetic world is the package demo/sam3_agent_demo, installed by make setup only:
    setup.py (pip, ament) and CMakeLists.txt (colcon) ship sam3_agent_ros without it."""
    packages = _setup_py_distribution()["packages"]
    assert PACKAGE in packages
    assert not [p for p in packages if "demo" in p.split(".")], packages
    assert not (REPO_ROOT / PACKAGE / "demo").exists()
    assert (REPO_ROOT / "demo" / "sam3_agent_demo" / "__init__.py").is_file()
    assert not (REPO_ROOT / "demo" / "__init__.py").exists()  # no package for find_packages
    assert "demo" not in (REPO_ROOT / "CMakeLists.txt").read_text().split()


def test_setup_py_console_scripts():
    scripts = _setup_py_distribution()["entry_points"]["console_scripts"]
    targets = dict(re.split(r"\s*=\s*", line, maxsplit=1) for line in scripts)
    assert targets == {"sam3-agent": "sam3_agent_ros.cli:main",
                       "sam3_agent_node": "sam3_agent_ros.ros.node:main"}


def test_package_xml_declares_ament_cmake_interfaces_and_dependencies():
    root = ET.parse(REPO_ROOT / "package.xml").getroot()
    assert root.get("format") == "3"
    assert root.findtext("name") == PACKAGE
    assert root.findtext("license") == "Apache-2.0"
    # ament_cmake: rosidl generates action/ and msg/, CMakeLists.txt installs the Python package.
    assert root.findtext("export/build_type") == "ament_cmake"
    assert root.findtext("member_of_group") == "rosidl_interface_packages"
    assert {e.text for e in root.findall("buildtool_depend")} >= {
        "ament_cmake", "ament_cmake_python", "rosidl_default_generators"}
    assert root.findtext("version") == _setup_py_distribution()["version"]
    exec_depends = {e.text for e in root.findall("exec_depend") + root.findall("depend")}
    assert exec_depends >= REQUIRED_EXEC_DEPENDS | {"rosidl_default_runtime", "action_msgs"}
    assert "python3-pytest" in {e.text for e in root.findall("test_depend")}


def test_cmake_installs_the_console_scripts_of_setup_py():
    scripts = _setup_py_distribution()["entry_points"]["console_scripts"]
    wanted = {name: target.rsplit(":", 1)[0] for name, target in
              (re.split(r"\s*=\s*", line, maxsplit=1) for line in scripts)}
    cmake = (REPO_ROOT / "CMakeLists.txt").read_text()
    listed = dict(re.findall(r'"([\w-]+)=([\w.]+)"', cmake))
    assert listed == wanted


def test_interfaces_are_defined_and_built_by_cmake():
    cmake = (REPO_ROOT / "CMakeLists.txt").read_text()
    for name in ("msg/MaskInfo.msg", "action/Segment.action"):
        assert (REPO_ROOT / name).is_file() and f'"{name}"' in cmake


@pytest.mark.skipif(importlib.util.find_spec("rclpy") is None, reason="ROS-free venv")
def test_venv_imports_the_source_package_with_the_generated_interfaces(tmp_path):
    # Outside the repository, as the console scripts run: the editable source package comes
    # first and pkgutil.extend_path merges site-packages/sam3_agent_ros/{action,msg} into it.
    code = ("import sam3_agent_ros, sam3_agent_ros.cli\n"
            "from sam3_agent_ros.action import Segment\n"
            "from sam3_agent_ros.msg import MaskInfo\n"
            "print(sam3_agent_ros.__file__)\n"
            "print(Segment.Goal(query='q').query, MaskInfo().bbox.shape)\n")
    completed = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                               text=True, timeout=120)
    assert completed.returncode == 0, completed.stderr + " (run `make setup`)"
    source, values = completed.stdout.splitlines()[-2:]
    assert Path(source) == REPO_ROOT / PACKAGE / "__init__.py"
    assert values == "q (4,)"


def test_license_is_apache_2():
    text = (REPO_ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text


@pytest.mark.parametrize("script", CONSOLE_SCRIPTS)
def test_console_scripts_are_installed_in_the_venv(script):
    path = Path(sys.executable).parent / script
    assert path.is_file() and os.access(path, os.X_OK), f"{path} missing: run `make setup`"


def test_cli_entry_point_runs():
    completed = subprocess.run([str(Path(sys.executable).parent / "sam3-agent"), "--help"],
                               capture_output=True, text=True, timeout=120)
    assert completed.returncode == 0, completed.stderr
    assert "run" in completed.stdout


def _pins(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        name, sep, version = line.partition("==")
        assert sep and re.fullmatch(r"[\w.]+", version), f"{path.name}: not an exact pin: {line}"
        pins[re.sub(r"[-_.]+", "-", name).lower()] = version
    return pins


def test_requirements_are_exact_pins_agreeing_with_constraints():
    requirements = REPO_ROOT / "requirements"
    constraints = _pins(requirements / "constraints.txt")
    for name in ("base.txt", "sam3-cpu.txt", "sam3-nodeps.txt", "dev.txt",
                 "interfaces-kilted.txt", "onnx.txt"):
        for package, version in _pins(requirements / name).items():
            assert constraints.get(package) == version, f"{name}: {package}=={version}"


def _pins_of_this_venv() -> dict[str, str]:
    """What the running venv was installed from: .venv from requirements/*.txt, an extra venv
    .venv-<name> from requirements/extra-venvs/constraints-<name>.txt
    (scripts/setup_extra_venv.sh)."""
    requirements = REPO_ROOT / "requirements"
    venv = Path(sys.prefix).name
    if venv.startswith(".venv-"):
        return _pins(requirements / "extra-venvs" / f"constraints-{venv[len('.venv-'):]}.txt")
    pins = {}
    for name in ("base.txt", "sam3-cpu.txt", "sam3-nodeps.txt", "dev.txt",
                 "interfaces-kilted.txt", "onnx.txt"):
        pins.update(_pins(requirements / name))
    return pins


def test_venv_matches_the_pins():
    mismatched = []
    for package, version in _pins_of_this_venv().items():
        try:
            installed = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            installed = None
        if installed is None or installed.split("+")[0] != version:
            mismatched.append(f"{package}: pinned {version}, installed {installed}")
    assert not mismatched, "run `make setup` (or `make setup-extra`): " + "; ".join(mismatched)


COLCON = shutil.which("colcon", path=str(Path(sys.executable).parent))


def _colcon_env() -> dict[str, str]:
    """A ROS workspace build without a ROS install: the venv is the ROS prefix (its wheels lay
    it out as one) and its python the interpreter; with apt ROS one sources /opt/ros instead."""
    prefix = sys.prefix
    return {**os.environ, "CMAKE_PREFIX_PATH": prefix, "AMENT_PREFIX_PATH": prefix}


@pytest.mark.skipif(COLCON is None, reason="colcon not installed (requirements/dev.txt)")
def test_colcon_build_installs_like_a_ros_package(tmp_path):
    # The checkout as a fresh clone has it (generated and local files left out).
    shutil.copytree(REPO_ROOT, tmp_path / "src" / PACKAGE, ignore=shutil.ignore_patterns(
        ".git", ".venv", ".venv-*", "out", "build", "install", "log", "__pycache__",
        "*.egg-info", ".pytest_cache", ".ruff_cache"))
    completed = subprocess.run(
        [COLCON, "build", "--base-paths", "src", "--event-handlers", "console_direct-",
         "--cmake-args", f"-DPython3_EXECUTABLE={sys.executable}", "-DBUILD_TESTING=OFF"],
        cwd=tmp_path, env=_colcon_env(), capture_output=True, text=True, timeout=600,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr

    prefix = tmp_path / "install" / PACKAGE
    share = prefix / "share" / PACKAGE
    for directory, names in _source_share_files().items():
        installed = sorted(p.name for p in (share / directory).iterdir()
                           if p.is_file()) if names else []
        assert installed == names, directory
    assert (share / "package.xml").is_file()
    assert (share / "action" / "Segment.action").is_file()
    assert (prefix / "share/ament_index/resource_index/packages" / PACKAGE).is_file()
    assert not list(prefix.rglob("sam3_agent_demo")) and not list(prefix.rglob(f"{PACKAGE}/demo"))
    for script in CONSOLE_SCRIPTS:  # where `ros2 run sam3_agent_ros <script>` looks
        assert os.access(prefix / "lib" / PACKAGE / script, os.X_OK), script

    # The installed package, as `source install/setup.bash` would put it first: code and
    # generated interfaces from the install tree.
    site_packages = next(prefix.glob("lib/python3*/site-packages"))
    env = {**os.environ, "PYTHONPATH": str(site_packages),
           "AMENT_PREFIX_PATH": os.pathsep.join([str(prefix), sys.prefix]),
           "LD_LIBRARY_PATH": os.pathsep.join(
               [str(prefix / "lib"), *filter(None, [os.environ.get("LD_LIBRARY_PATH")])])}
    completed = subprocess.run(
        [sys.executable, "-c", "import sam3_agent_ros.action, sam3_agent_ros.cli as c\n"
         "print(sam3_agent_ros.action.__file__); print(c.__file__)"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert completed.returncode == 0, completed.stderr
    for path in completed.stdout.split():
        assert Path(path).is_relative_to(site_packages / PACKAGE), path

    # The installed node answers a goal from the installed `sam3-agent ask --ros` (no camera
    # here: the goal ends with the node's "no frame" failure, over the real action).
    node = subprocess.Popen(
        [str(prefix / "lib" / PACKAGE / "sam3_agent_node"), "--ros-args",
         "-r", "__ns:=/colcon_ws", "-p", "llm.backend:=offline", "-p", "segmenter.backend:=color",
         "-p", "frame_wait_s:=0.5"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        completed = subprocess.run(
            [str(prefix / "lib" / PACKAGE / "sam3-agent"), "ask", "--ros", "the cup",
             "--action", "/colcon_ws/sam3_agent/segment", "--query-id", "ws-1",
             "--timeout", "60"],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    finally:
        node.send_signal(signal.SIGINT)
        log = node.communicate(timeout=30)[0]
    assert completed.returncode == 1, completed.stderr + log
    result = json.loads(completed.stdout)
    assert (result["query_id"], result["status"]) == ("ws-1", "failed")
    assert "no frame received" in result["error"]

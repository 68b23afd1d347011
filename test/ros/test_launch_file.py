"""launch/sam3_agent.launch.py: checked structurally everywhere, run for real where `launch`
(ROS 2's launch + launch_ros, not on PyPI) imports."""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from sam3_agent_ros.config import PARAMETERS_BY_NAME

REPO_ROOT = Path(__file__).resolve().parents[2]
LAUNCH_FILE = REPO_ROOT / "launch" / "sam3_agent.launch.py"
EXPECTED_ARGUMENTS = {"namespace", "image_topic", "query_topic", "params_file", "llm_base_url",
                      "llm_model", "offline"}


@pytest.fixture(scope="module")
def tree() -> ast.Module:
    return ast.parse(LAUNCH_FILE.read_text(), filename=str(LAUNCH_FILE))


def _calls(tree: ast.Module, name: str) -> list[ast.Call]:
    def called(node: ast.Call) -> str | None:
        return getattr(node.func, "id", None) or getattr(node.func, "attr", None)

    return [node for node in ast.walk(tree) if isinstance(node, ast.Call) and called(node) == name]


def _first_string(call: ast.Call) -> str:
    assert call.args and isinstance(call.args[0], ast.Constant), ast.dump(call)
    return call.args[0].value


def test_declares_the_documented_arguments_each_with_a_description(tree):
    declared = _calls(tree, "DeclareLaunchArgument")
    assert {_first_string(c) for c in declared} == EXPECTED_ARGUMENTS
    for call in declared:
        keywords = {k.arg for k in call.keywords}
        assert {"default_value", "description"} <= keywords, _first_string(call)


def test_every_argument_is_used_and_every_use_is_declared(tree):
    declared = {_first_string(c) for c in _calls(tree, "DeclareLaunchArgument")}
    used = {_first_string(c) for c in _calls(tree, "LaunchConfiguration")}
    assert used == declared


def test_is_declarative(tree):
    """No eval/exec/OpaqueFunction: the description is data, readable by ros2 launch -s."""
    names = {getattr(n.func, "id", getattr(n.func, "attr", "")) for n in ast.walk(tree)
             if isinstance(n, ast.Call)}
    assert not names & {"eval", "exec", "OpaqueFunction", "PythonExpression"}
    functions = [n.name for n in tree.body if isinstance(n, ast.FunctionDef)]
    assert functions == ["generate_launch_description"]


def test_starts_the_lifecycle_node_by_its_executable(tree):
    nodes = _calls(tree, "LifecycleNode")
    assert nodes
    for call in nodes:
        keywords = {k.arg: k.value for k in call.keywords}
        assert ast.literal_eval(keywords["executable"]) == "sam3_agent_node"
        assert ast.literal_eval(keywords["name"]) == "sam3_agent"
        assert {"namespace", "parameters", "remappings"} <= set(keywords)


def test_parameter_names_it_sets_exist(tree):
    names = [node.value for node in ast.walk(tree) if isinstance(node, ast.Constant)
             and isinstance(node.value, str) and node.value.startswith(("llm.", "segmenter."))]
    assert names and all(name in PARAMETERS_BY_NAME for name in names)


def test_referenced_files_are_installed_by_setup_py():
    code = ("import json, runpy, setuptools\n"
            "captured = {}\n"
            "setuptools.setup = lambda **kwargs: captured.update(kwargs)\n"
            "runpy.run_path('setup.py')\n"
            "print(json.dumps(captured['data_files']))\n")
    completed = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True,
                               text=True, timeout=120)
    assert completed.returncode == 0, completed.stderr
    installed = {(folder, Path(f).name) for folder, files in json.loads(
        completed.stdout.strip().splitlines()[-1]) for f in files}
    share = "share/sam3_agent_ros"
    assert (f"{share}/launch", LAUNCH_FILE.name) in installed
    assert (f"{share}/config", "sam3_agent.yaml") in installed
    assert (f"{share}/config", "fastdds_large_images.xml") in installed
    text = LAUNCH_FILE.read_text()
    assert '"config"' in text and '"sam3_agent.yaml"' in text


def test_launch_description_runs_the_node():
    """Only where ROS 2's launch and launch_ros are installed (a ROS workspace, not PyPI)."""
    launch = pytest.importorskip("launch", reason="ROS 2 'launch' is not installable from PyPI")
    pytest.importorskip("launch_ros", reason="ROS 2 'launch_ros' is not installable from PyPI")
    if not hasattr(launch, "LaunchService"):
        pytest.skip("the 'launch' module here is not ROS 2's launch")
    try:
        from ament_index_python.packages import get_package_share_directory

        get_package_share_directory("sam3_agent_ros")
    except Exception as exc:  # not installed in an ament prefix
        pytest.skip(f"sam3_agent_ros is not installed in an ament prefix: {exc}")
    from test.ros.helpers import Harness

    spec = importlib.util.spec_from_file_location("sam3_agent_launch", LAUNCH_FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    service = launch.LaunchService(argv=["namespace:=launch_test", "offline:=true"])
    service.include_launch_description(module.generate_launch_description())
    runner = threading.Thread(target=service.run, daemon=True)
    harness = Harness("launch_file_test")
    runner.start()
    try:
        harness.wait_state("/launch_test/sam3_agent", "active", timeout=60)
    finally:
        service.shutdown()
        runner.join(30)
        harness.close()
    assert os.environ.get("ROS_AUTOMATIC_DISCOVERY_RANGE") == "LOCALHOST"

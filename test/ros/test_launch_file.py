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
import types
from pathlib import Path

import pytest

from sam3_agent_ros.config import (
    OFFLINE_BACKENDS,
    PARAMETERS_BY_NAME,
    Config,
    flatten,
    load_params_file,
)

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


def test_ctrl_c_escalates_to_sigterm_then_sigkill_after_seconds(monkeypatch):
    """launch sends SIGINT, then SIGTERM after ``sigterm_timeout``, SIGKILL ``sigkill_timeout``
    later (launch_ros Node -> ExecuteProcess arguments). The node exits within 2 s of SIGINT, even
    mid-query (bench/node_exit.py): SIGTERM must not come sooner, and not much later either."""
    for offline in ("true", "false"):
        node, _ = _launched(monkeypatch, {"offline": offline})
        sigterm_s = float(node.kwargs["sigterm_timeout"])
        sigkill_s = float(node.kwargs["sigkill_timeout"])
        assert 2.0 < sigterm_s <= 5.0 and 0.0 < sigkill_s <= 5.0, node.kwargs


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


def test_the_offline_table_comes_from_config(tree):
    """One table of the offline backends (config.OFFLINE_BACKENDS), no copy in the launch file."""
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                and node.module == "sam3_agent_ros.config" for alias in node.names}
    assert "OFFLINE_BACKENDS" in imported
    literals = {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant)}
    assert not literals & {"llm.backend", "segmenter.backend", "color"}


# --- the launch description evaluated with recording stand-ins for ROS 2's launch ------------
# (launch and launch_ros are not installable from PyPI; the real run is the test above.)


class _Config:  # LaunchConfiguration
    def __init__(self, name):
        self.name = name


class _Condition:  # IfCondition / UnlessCondition
    def __init__(self, predicate, expected):
        self.predicate, self.expected = predicate, expected


class _Recorded:  # DeclareLaunchArgument, LifecycleNode, LaunchDescription
    def __init__(self, *args, **kwargs):
        self.args, self.kwargs = args, kwargs


def _launch_stand_ins(share_dir: Path) -> dict[str, types.ModuleType]:
    def module(name, **attrs):
        mod = types.ModuleType(name)
        mod.__dict__.update(attrs)
        return mod

    return {
        "ament_index_python": module("ament_index_python"),
        "ament_index_python.packages": module(
            "ament_index_python.packages", get_package_share_directory=lambda _: str(share_dir)),
        "launch": module("launch", LaunchDescription=_Recorded),
        "launch.actions": module("launch.actions", DeclareLaunchArgument=_Recorded),
        "launch.conditions": module(
            "launch.conditions", IfCondition=lambda p: _Condition(p, "true"),
            UnlessCondition=lambda p: _Condition(p, "false")),
        "launch.substitutions": module("launch.substitutions", LaunchConfiguration=_Config),
        "launch_ros": module("launch_ros"),
        "launch_ros.actions": module("launch_ros.actions", LifecycleNode=_Recorded),
    }


def _launched(monkeypatch, arguments: dict[str, str]):
    """(the node action that runs with these launch arguments, a resolver of its values)."""
    for name, stand_in in _launch_stand_ins(REPO_ROOT).items():  # share/config = config/
        monkeypatch.setitem(sys.modules, name, stand_in)
    spec = importlib.util.spec_from_file_location("sam3_agent_launch_recorded", LAUNCH_FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    description = module.generate_launch_description()
    entities = description.args[0]
    values = {e.args[0]: e.kwargs["default_value"] for e in entities
              if "default_value" in e.kwargs}
    values.update(arguments)

    def resolve(value):
        return values[value.name] if isinstance(value, _Config) else value

    nodes = [e for e in entities if "executable" in e.kwargs
             and resolve(e.kwargs["condition"].predicate) == e.kwargs["condition"].expected]
    assert len(nodes) == 1, "exactly one node runs for any value of 'offline'"
    return nodes[0], resolve


def _launched_parameters(monkeypatch, arguments: dict[str, str]) -> dict:
    """The parameters of the one node the launch file starts with these launch arguments,
    resolved as launch_ros does: files and dictionaries in order, later ones win."""
    node, resolve = _launched(monkeypatch, arguments)
    params: dict = {}
    for entry in node.kwargs["parameters"]:
        if isinstance(entry, dict):
            params.update(flatten({name: resolve(v) for name, v in entry.items()}))
        else:
            params.update(load_params_file(resolve(entry)))
    return params


def test_launch_defaults_are_the_real_backends(monkeypatch):
    config = Config.from_params(_launched_parameters(monkeypatch, {}))
    assert config.backends == {"llm": "openai", "segmenter": "sam3"}
    assert config == Config()  # the launch file's own defaults are the package defaults


def test_offline_true_sets_the_offline_backends_only(monkeypatch):
    params = _launched_parameters(monkeypatch, {"offline": "true"})
    config = Config.from_params(params)
    assert config.backends == {"llm": "offline", "segmenter": "color"}
    assert {name: params[name] for name in OFFLINE_BACKENDS} == OFFLINE_BACKENDS
    assert config.llm.base_url == Config().llm.base_url


def test_endpoint_arguments_apply_on_top_of_the_params_file(monkeypatch, tmp_path):
    own = tmp_path / "own.yaml"
    own.write_text("sam3_agent:\n  ros__parameters:\n    agent:\n      max_rounds: 5\n")
    config = Config.from_params(_launched_parameters(monkeypatch, {
        "params_file": str(own), "llm_base_url": "http://gpu-box:8000/v1"}))
    assert config.llm.base_url == "http://gpu-box:8000/v1" and config.agent.max_rounds == 5
    assert config.backends == {"llm": "openai", "segmenter": "sam3"}

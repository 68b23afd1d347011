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
from dataclasses import dataclass
from pathlib import Path

import pytest

from sam3_agent_ros.config import OFFLINE_BACKENDS, PARAMETERS_BY_NAME, Config
from sam3_agent_ros.ros import params

REPO_ROOT = Path(__file__).resolve().parents[2]
LAUNCH_FILE = REPO_ROOT / "launch" / "sam3_agent.launch.py"
EXPECTED_ARGUMENTS = {"namespace", "image_topic", "query_topic", "params_file", "llm_base_url",
                      "llm_model", "offline", "rviz", "rviz_frame"}
RVIZ_CONFIG = REPO_ROOT / "config" / "sam3_agent.rviz"


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
        assert {"namespace", "remappings"} <= set(keywords)


def test_ctrl_c_escalates_to_sigterm_then_sigkill_after_seconds(monkeypatch, tmp_path):
    """launch sends SIGINT, then SIGTERM after ``sigterm_timeout``, SIGKILL ``sigkill_timeout``
    later (launch_ros Node -> ExecuteProcess arguments). The node exits within 2 s of SIGINT, even
    mid-query (bench/node_exit.py): SIGTERM must not come sooner, and not much later either."""
    for offline in ("true", "false"):
        sigterm_s, sigkill_s = _launched(monkeypatch, tmp_path, {"offline": offline}).stop_timeouts
        assert 2.0 < sigterm_s <= 5.0 and 0.0 < sigkill_s <= 5.0, (sigterm_s, sigkill_s)


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
    assert (f"{share}/config", RVIZ_CONFIG.name) in installed
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
# (launch and launch_ros are not installable from PyPI; the real run is the test above.) The
# stand-ins record the actions; ``_launched`` walks them as launch does (arguments, conditions,
# scoped groups, global parameters) and renders the node's parameter arguments as launch_ros does:
# the group's parameters in order (``--params-file F``, ``-p name:=value``), then the node's own.
# Real rclpy then resolves that command line: what the node would read at start-up.


class _Config:  # LaunchConfiguration
    def __init__(self, name):
        self.name = name


class _Context:  # LaunchContext: what conditions look at
    def __init__(self, launch_configurations):
        self.launch_configurations = launch_configurations

    def resolve(self, value):
        return self.launch_configurations[value.name] if isinstance(value, _Config) else value


class _IfCondition:  # IfCondition / UnlessCondition
    def __init__(self, predicate, expected):
        self.predicate, self.expected = predicate, expected

    def holds(self, context):
        value = context.resolve(self.predicate).lower()
        assert value in ("true", "false"), value  # launch refuses anything else
        return value == self.expected


class _Condition:  # launch.Condition(predicate=callable)
    def __init__(self, *, predicate):
        self.predicate = predicate

    def holds(self, context):
        return bool(self.predicate(context))


class _Recorded:
    def __init__(self, *args, **kwargs):
        self.args, self.kwargs = args, kwargs


class _Description(_Recorded): ...  # LaunchDescription
class _Declare(_Recorded): ...  # DeclareLaunchArgument
class _Group(_Recorded): ...  # GroupAction
class _Node(_Recorded): ...  # LifecycleNode
class _SetParameter(_Recorded): ...  # SetParameter
class _SetParametersFromFile(_Recorded): ...  # SetParametersFromFile
class _PlainNode(_Recorded): ...  # Node (rviz2)


def _launch_stand_ins(share_dir: Path) -> dict[str, types.ModuleType]:
    def module(name, **attrs):
        mod = types.ModuleType(name)
        mod.__dict__.update(attrs)
        return mod

    return {
        "ament_index_python": module("ament_index_python"),
        "ament_index_python.packages": module(
            "ament_index_python.packages", get_package_share_directory=lambda _: str(share_dir)),
        "launch": module("launch", LaunchDescription=_Description, Condition=_Condition),
        "launch.actions": module("launch.actions", DeclareLaunchArgument=_Declare,
                                 GroupAction=_Group),
        "launch.conditions": module(
            "launch.conditions", IfCondition=lambda p: _IfCondition(p, "true"),
            UnlessCondition=lambda p: _IfCondition(p, "false")),
        "launch.substitutions": module("launch.substitutions", LaunchConfiguration=_Config),
        "launch_ros": module("launch_ros"),
        "launch_ros.actions": module(
            "launch_ros.actions", LifecycleNode=_Node, Node=_PlainNode,
            SetParameter=_SetParameter, SetParametersFromFile=_SetParametersFromFile),
    }


@dataclass
class _Launched:
    namespace: str
    name: str
    parameter_arguments: list[str]  # as launch_ros puts them on the node's command line
    top_level: list  # the description's entities
    others: list  # the other nodes started (rviz2): (package, executable, namespace, arguments)
    stop_timeouts: tuple[float, float]  # (sigterm_timeout, sigkill_timeout) in seconds


def _launched(monkeypatch, tmp_path: Path, arguments: dict[str, str]) -> _Launched:
    """The one node the launch file starts with these launch arguments."""
    for name, stand_in in _launch_stand_ins(REPO_ROOT).items():  # share/config = config/
        monkeypatch.setitem(sys.modules, name, stand_in)
    spec = importlib.util.spec_from_file_location("sam3_agent_launch_recorded", LAUNCH_FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    entities = module.generate_launch_description().args[0]
    context = _Context(dict(arguments))  # given on the command line: set before any declaration
    launched: list[_Launched] = []
    others: list[tuple] = []

    def visit(actions, global_params):
        for action in actions:
            condition = action.kwargs.get("condition")
            if condition is not None and not condition.holds(context):
                continue
            if isinstance(action, _Declare):
                context.launch_configurations.setdefault(action.args[0],
                                                         action.kwargs["default_value"])
            elif isinstance(action, _Group):  # scoped: what is set inside stays inside
                visit(action.args[0], list(global_params))
            elif isinstance(action, _SetParametersFromFile):
                global_params += ["--params-file", context.resolve(action.args[0])]
            elif isinstance(action, _SetParameter):
                value = context.resolve(action.kwargs["value"])
                global_params += ["-p", f"{action.kwargs['name']}:={value}"]
            elif isinstance(action, _Node):
                launched.append(node_launched(action, list(global_params)))
            elif isinstance(action, _PlainNode):
                others.append((action.kwargs["package"], action.kwargs["executable"],
                               context.resolve(action.kwargs["namespace"]),
                               [context.resolve(a) for a in action.kwargs["arguments"]]))

    def node_launched(node, arguments_so_far):
        namespace = "/" + context.resolve(node.kwargs["namespace"]).strip("/")
        name = node.kwargs["name"]
        for index, entry in enumerate(node.kwargs.get("parameters", [])):
            if isinstance(entry, dict):  # launch_ros writes it to a file for the node's name
                entry = _params_file(tmp_path / f"node_parameters_{index}.yaml",
                                     f"{namespace.rstrip('/')}/{name}",
                                     {k: context.resolve(v) for k, v in entry.items()})
            arguments_so_far += ["--params-file", str(context.resolve(entry))]
        stop_timeouts = (float(node.kwargs["sigterm_timeout"]),
                         float(node.kwargs["sigkill_timeout"]))
        return _Launched(namespace, name, arguments_so_far, list(entities), others, stop_timeouts)

    visit(entities, [])
    assert len(launched) == 1, "exactly one node runs for any value of the arguments"
    return launched[0]


def test_rviz_true_starts_rviz2_with_the_shipped_config_in_the_nodes_namespace(monkeypatch,
                                                                                tmp_path):
    assert _launched(monkeypatch, tmp_path, {}).others == []  # rviz:=false, the default
    launched = _launched(monkeypatch, tmp_path, {"rviz": "true", "namespace": "robot1"})
    assert launched.others == [("rviz2", "rviz2", "robot1",
                                ["-d", str(RVIZ_CONFIG), "-f", "camera_color_optical_frame"])]
    framed = _launched(monkeypatch, tmp_path, {"rviz": "true", "rviz_frame": "base_link"})
    assert framed.others[0][3][-2:] == ["-f", "base_link"]


def test_the_rviz_config_shows_the_nodes_outputs_by_relative_names():
    """config/sam3_agent.rviz: overlay, markers (answers and standing concepts), box poses,
    target and the target's points (issue 27) of the node, by names relative to rviz2's
    namespace (the launch file puts it in the node's); the launch default frame as its fixed
    frame."""
    import yaml

    config = yaml.safe_load(RVIZ_CONFIG.read_text())
    manager = config["Visualization Manager"]
    displays = manager["Displays"]
    topics = sorted((d["Class"].rsplit("/", 1)[-1], d["Topic"]["Value"]) for d in displays
                    if "Topic" in d)
    assert topics == [("Image", "sam3_agent/overlay"),
                      ("MarkerArray", "sam3_agent/concepts/markers"),
                      ("MarkerArray", "sam3_agent/markers"),
                      ("PointCloud2", "sam3_agent/target/points"),
                      ("PointStamped", "sam3_agent/target"),
                      ("PoseArray", "sam3_agent/targets")]
    assert all(d["Enabled"] for d in displays)
    assert manager["Global Options"]["Fixed Frame"] == "camera_color_optical_frame"
    from sam3_agent_ros.ros.messages.markers import BOX_NAMESPACE, LABEL_NAMESPACE

    for display in displays:
        if display["Class"] == "rviz_default_plugins/MarkerArray":
            assert set(display["Namespaces"]) == {BOX_NAMESPACE, LABEL_NAMESPACE}


def _launched_parameters(monkeypatch, tmp_path: Path, arguments: dict[str, str]) -> dict:
    """The node's parameters at start-up, as real rclpy resolves the launched command line."""
    import rclpy

    launched = _launched(monkeypatch, tmp_path, arguments)
    context = rclpy.Context()
    rclpy.init(args=["sam3_agent_node", "--ros-args", *launched.parameter_arguments],
               context=context)
    try:
        node = rclpy.create_node(launched.name, namespace=launched.namespace, context=context)
        assert params.declare_parameters(node) == []  # as the node declares them
        values = params.current_values(node)
        node.destroy_node()
    finally:
        rclpy.shutdown(context=context)
    return values


def _params_file(path: Path, key: str, parameters: dict) -> str:
    path.write_text(json.dumps({key: {"ros__parameters": parameters}}))  # JSON is YAML
    return str(path)


def test_parameters_are_set_for_the_node_alone(monkeypatch, tmp_path):
    """Set inside a group: they do not reach other nodes of a launch file including this one."""
    launched = _launched(monkeypatch, tmp_path, {})
    assert not [e for e in launched.top_level
                if isinstance(e, (_SetParameter, _SetParametersFromFile))]
    assert launched.parameter_arguments[:2] == ["--params-file",
                                                str(REPO_ROOT / "config" / "sam3_agent.yaml")]


def test_launch_defaults_are_the_real_backends(monkeypatch, tmp_path):
    config = Config.from_params(_launched_parameters(monkeypatch, tmp_path, {}))
    assert config.backends == {"llm": "openai", "segmenter": "sam3"}
    assert config == Config()  # the launch file's own defaults are the package defaults


def test_offline_true_sets_the_offline_backends_only(monkeypatch, tmp_path):
    params = _launched_parameters(monkeypatch, tmp_path, {"offline": "true"})
    config = Config.from_params(params)
    assert config.backends == {"llm": "offline", "segmenter": "color"}
    assert {name: params[name] for name in OFFLINE_BACKENDS} == OFFLINE_BACKENDS
    assert config.llm.base_url == Config().llm.base_url


def test_endpoint_arguments_apply_on_top_of_the_params_file(monkeypatch, tmp_path):
    own = _params_file(tmp_path / "own.yaml", "sam3_agent", {"agent": {"max_rounds": 5}})
    config = Config.from_params(_launched_parameters(monkeypatch, tmp_path, {
        "params_file": own, "llm_base_url": "http://gpu-box:8000/v1"}))
    assert config.llm.base_url == "http://gpu-box:8000/v1" and config.agent.max_rounds == 5
    assert config.backends == {"llm": "openai", "segmenter": "sam3"}


# A params file names the node (with or without its namespace) or every node.
FILE_KEYS = [("", "sam3_agent"), ("", "/**"), ("robot1", "/robot1/sam3_agent"),
             ("robot1", "/**")]
FILE_ENDPOINT = {"llm": {"base_url": "http://from-file:8000/v1", "model": "file-model"}}


@pytest.mark.parametrize(("namespace", "key"), FILE_KEYS)
def test_a_params_file_sets_the_endpoint_when_the_arguments_are_not_given(
        monkeypatch, tmp_path, namespace, key):
    """The review's bug: the arguments' defaults used to override the user's params file."""
    own = _params_file(tmp_path / "own.yaml", key, FILE_ENDPOINT)
    config = Config.from_params(_launched_parameters(monkeypatch, tmp_path, {
        "params_file": own, "namespace": namespace}))
    assert (config.llm.base_url, config.llm.model) == ("http://from-file:8000/v1", "file-model")


@pytest.mark.parametrize(("namespace", "key"), FILE_KEYS)
def test_given_arguments_override_the_params_file_each_alone(monkeypatch, tmp_path, namespace,
                                                              key):
    own = _params_file(tmp_path / "own.yaml", key, FILE_ENDPOINT)
    config = Config.from_params(_launched_parameters(monkeypatch, tmp_path, {
        "params_file": own, "namespace": namespace, "llm_model": "Qwen/Qwen3-VL-8B-Instruct"}))
    assert (config.llm.base_url, config.llm.model) == ("http://from-file:8000/v1",
                                                       "Qwen/Qwen3-VL-8B-Instruct")
    config = Config.from_params(_launched_parameters(monkeypatch, tmp_path, {
        "params_file": own, "namespace": namespace, "llm_base_url": "http://gpu-box:8000/v1"}))
    assert (config.llm.base_url, config.llm.model) == ("http://gpu-box:8000/v1", "file-model")


@pytest.mark.parametrize(("namespace", "key"), FILE_KEYS)
def test_offline_true_wins_over_backends_in_the_params_file(monkeypatch, tmp_path, namespace,
                                                            key):
    own = _params_file(tmp_path / "own.yaml", key, {"llm": {"backend": "openai"},
                                                    "segmenter": {"backend": "sam3"}})
    config = Config.from_params(_launched_parameters(monkeypatch, tmp_path, {
        "params_file": own, "namespace": namespace, "offline": "true"}))
    assert config.backends == {"llm": "offline", "segmenter": "color"}

"""The node executable's own command line (ros/node_cli.py): --help, and params files that
cannot be used, answered in one line before rclpy starts; then the executable run as a user
would run it."""

from __future__ import annotations

import io
import os
import subprocess

import pytest

from sam3_agent_ros.config import PARAMETERS_BY_NAME
from sam3_agent_ros.ros import node_cli
from test.ros.helpers import node_command


@pytest.mark.parametrize("argv,wanted", [
    (["--help"], True), (["-h"], True), (["--ros-args", "-p", "a:=1"], False),
    (["--ros-args", "-r", "x:=-h"], False), ([], False),
])
def test_help_is_only_the_program_s_own_flag(argv, wanted):
    assert node_cli.help_requested(argv) is wanted


def test_params_files_are_read_from_ros_args_sections_only():
    argv = ["--params-file", "not-ros.yaml", "--ros-args", "--params-file", "a.yaml", "-p",
            "x:=1", "--", "--params-file", "user.yaml", "--ros-args", "--params-file", "b.yaml"]
    assert node_cli.params_files(argv) == ["a.yaml", "b.yaml"]


def test_a_readable_yaml_file_is_left_to_rcl(tmp_path):
    good = tmp_path / "good.yaml"
    good.write_text("/**:\n  ros__parameters:\n    autostart: false\n")
    assert node_cli.params_file_problem(["--ros-args", "--params-file", str(good)]) is None
    out, err = io.StringIO(), io.StringIO()
    assert node_cli.early_exit(["--ros-args", "--params-file", str(good)], out, err) is None
    assert out.getvalue() == err.getvalue() == ""


def test_the_usage_names_the_main_parameters_with_their_defaults_and_every_launch_argument(
        repo_root):
    text = node_cli.usage()
    for name in node_cli.MAIN_PARAMETERS:
        line = next(ln for ln in text.splitlines() if ln.strip().startswith(name + " "))
        param = PARAMETERS_BY_NAME[name]
        assert ("[read-only at runtime]" in line) is param.read_only, line
    default_backend = PARAMETERS_BY_NAME["llm.backend"].default
    assert f"llm.backend            default {default_backend} " in text
    launch = (repo_root / "launch" / "sam3_agent.launch.py").read_text()
    declared = {line.split('"')[1] for line in launch.splitlines()
                if "DeclareLaunchArgument(" in line}
    assert declared and declared == set(node_cli.LAUNCH_ARGUMENTS)
    for argument in declared:
        assert f"[{argument}:=...]" in text


def run_node(args: list[str], cwd, timeout: float = 60) -> subprocess.CompletedProcess:
    """The node executable run to its end (it must end by itself: a started node spins)."""
    env = dict(os.environ)
    env.pop("_ROS_WHEELS_BOOTSTRAP_COMPLETE", None)
    return subprocess.run(node_command() + args, capture_output=True, text=True, cwd=cwd,
                          timeout=timeout, env=env)


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_prints_usage_and_exits_without_starting(flag, tmp_path):
    done = run_node([flag], tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: sam3_agent_node")
    for text in ("llm.backend", "llm.base_url", "segmenter.backend", "[read-only at runtime]",
                 "-p llm.backend:=offline -p segmenter.backend:=color", "params_file:=",
                 "docs/ros.md"):
        assert text in done.stdout, text
    assert "[INFO]" not in done.stdout + done.stderr  # no node came up


@pytest.mark.parametrize("content,expected", [
    (None, "cannot read params file 'nope.yaml': No such file or directory"),
    ("dir", "cannot read params file 'params_dir': Is a directory"),
    ("a: [\n", "params file 'bad.yaml' is not valid YAML:"),
    ("/**:\n  ros__parameters:\n    x: [1, \"s\"]\n", "cannot start: failed to initialize rcl: "
     "Couldn't parse params file"),
], ids=["missing", "directory", "not-yaml", "rcl-refuses"])
def test_an_unusable_params_file_is_one_line_and_a_failure(tmp_path, content, expected):
    name = {None: "nope.yaml", "dir": "params_dir", "a: [\n": "bad.yaml"}.get(content, "rcl.yaml")
    if content == "dir":
        (tmp_path / name).mkdir()
    elif content is not None:
        (tmp_path / name).write_text(content)
    done = run_node(["--ros-args", "--params-file", name], tmp_path)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr + done.stdout
    ours = [ln for ln in done.stderr.splitlines() if ln.startswith("sam3_agent_node: ")]
    assert len(ours) == 1 and expected in ours[0], done.stderr
    if content in (None, "dir", "a: [\n"):  # caught before rclpy: nothing else is printed
        assert done.stderr.splitlines() == ours and done.stdout == ""

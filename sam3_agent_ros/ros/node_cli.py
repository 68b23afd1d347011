"""The node executable's own command line, handled before rclpy starts (no rclpy import here).

- ``sam3_agent_node --help`` / ``-h`` (before any ``--ros-args``) prints ``usage()`` and exits 0;
- a ``--params-file`` that cannot be read, or is not YAML, is one line on stderr and exit status
  2, where rclpy would raise a traceback from ``rclpy.init`` (``node.main`` turns rcl's other
  refusals into one line too).
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

import yaml

from sam3_agent_ros.config import NODE_NAME, PARAMETERS_BY_NAME

PROGRAM = "sam3_agent_node"
WIDTH = 100
# The parameters a first user sets; `ros2 param describe` and config/sam3_agent.yaml list them all.
MAIN_PARAMETERS = ("llm.backend", "llm.base_url", "llm.model", "llm.api_key_env",
                   "segmenter.backend", "segmenter.checkpoint", "segmenter.device", "autostart",
                   "image_transport", "query_policy", "depth.enabled")
LAUNCH_ARGUMENTS = ("namespace", "image_topic", "query_topic", "params_file", "llm_base_url",
                    "llm_model", "offline", "rviz", "rviz_frame")


def help_requested(argv: Sequence[str]) -> bool:
    """``-h``/``--help`` among the program's own arguments (``argv`` without the program name;
    what follows ``--ros-args`` belongs to ROS)."""
    own = list(argv)
    if "--ros-args" in own:
        own = own[:own.index("--ros-args")]
    return "-h" in own or "--help" in own


def params_files(argv: Sequence[str]) -> list[str]:
    """The ``--params-file FILE`` arguments inside ``--ros-args`` sections."""
    files, in_ros_args = [], False
    args = list(argv)
    for i, arg in enumerate(args):
        if arg == "--ros-args":
            in_ros_args = True
        elif arg == "--":
            in_ros_args = False
        elif in_ros_args and arg == "--params-file" and i + 1 < len(args):
            files.append(args[i + 1])
    return files


def params_file_problem(argv: Sequence[str]) -> str | None:
    """One line saying which ``--params-file`` cannot be read or is not YAML, or None (rcl
    checks the rest of its shape when rclpy starts)."""
    for name in params_files(argv):
        try:
            with open(name, "rb") as file:
                yaml.safe_load(file)
        except OSError as exc:
            return f"{PROGRAM}: cannot read params file {name!r}: {exc.strerror}"
        except yaml.YAMLError as exc:
            reason = " ".join(str(exc).split())
            return f"{PROGRAM}: params file {name!r} is not valid YAML: {reason}"
    return None


def _parameter_line(name: str) -> str:
    param = PARAMETERS_BY_NAME[name]
    default = param.default
    shown = ("true" if default else "false") if isinstance(default, bool) else (
        repr(default) if default == "" else str(default))
    choices = ""
    if param.choices is not None:
        choices = " (" + " | ".join(str(c) for c in param.choices if c != "")
        choices += " | package.module:factory)" if param.free_form_hint == "plugin" else ")"
    read_only = "  [read-only at runtime]" if param.read_only else ""
    return f"  {name:<22} default {shown}{choices}{read_only}"


def usage() -> str:
    """What ``--help`` prints: what the node is, how to start it, its main parameters."""
    share = "share/sam3_agent_ros"
    node = f"/{NODE_NAME}"

    def paragraph(text: str) -> list[str]:
        return [*textwrap.wrap(text, WIDTH, break_on_hyphens=False), ""]

    return "\n".join([
        f"usage: {PROGRAM} [-h] [--ros-args [--params-file FILE] [-p NAME:=VALUE]... "
        "[-r __ns:=/NAMESPACE]]",
        "",
        *paragraph(
            f"The ROS 2 lifecycle node '{NODE_NAME}': answers a natural-language query on the "
            "'query' topic (\"the leftmost blue object\") on the latest frame of the 'image' "
            "topic. A multimodal LLM (any OpenAI-compatible endpoint) calls SAM 3 as a "
            "segmentation tool; the node publishes ~/mask, ~/labels, ~/overlay, ~/result and "
            "~/status stamped with that frame, and serves the action ~/segment."),
        "Main parameters (-p NAME:=VALUE or a params file; all of them, one comment each, in",
        f"{share}/config/sam3_agent.yaml):",
        *(_parameter_line(name) for name in MAIN_PARAMETERS if name in PARAMETERS_BY_NAME),
        "Read-only parameters are set at start-up only: restart the node to change them.",
        "",
        "Try it without a model (the offline demo planner and colour segmenter):",
        f"  {PROGRAM} --ros-args -p llm.backend:=offline -p segmenter.backend:=color",
        "With a model:",
        f"  {PROGRAM} --ros-args -p llm.backend:=openai -p segmenter.backend:=sam3 \\",
        "      -p llm.base_url:=http://gpu-box:8000/v1 -p llm.model:=Qwen/Qwen3-VL-8B-Instruct",
        "Launch file (ROS install):",
        "  ros2 launch sam3_agent_ros sam3_agent.launch.py "
        + " ".join(f"[{name}:=...]" for name in LAUNCH_ARGUMENTS),
        "",
        *paragraph(
            f"With autostart:=false, configure then activate it: 'ros2 lifecycle set {node} "
            f"configure' then 'ros2 lifecycle set {node} activate'; without the ros2 CLI: "
            f"'sam3-agent lifecycle configure --node {node}' then 'sam3-agent lifecycle activate "
            f"--node {node}'."),
        *paragraph(
            "Docs: README.md and docs/ros.md in the source repository (topics, action, "
            "parameters, lifecycle, launch file). Installed defaults and launch file: "
            f"{share}/config/ and {share}/launch/."),
    ])


def early_exit(argv: Sequence[str], out, err) -> int | None:
    """Handle what needs no rclpy: the exit status to return, or None to start the node."""
    if help_requested(argv):
        out.write(usage())
        return 0
    problem = params_file_problem(argv)
    if problem is not None:
        err.write(problem + "\n")
        return 2
    return None

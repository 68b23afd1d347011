"""What the node tells its operator to do next, in words that work as written.

Every hint gives a lifecycle command in two forms: the ``ros2`` CLI (a ROS install) and the
``sam3-agent lifecycle`` verbs (a venv with the ROS 2 wheels has no ``ros2``). ``node`` is the
node's fully qualified name (``/robot1/sam3_agent``), so a namespaced node gets its real name.
"""

from __future__ import annotations

from collections.abc import Sequence

from sam3_agent_ros.config import PARAMETERS_BY_NAME
from sam3_agent_ros.ros.params import Problem

RESTART_HOW = "its params file, a launch argument or -p NAME:=VALUE"


def lifecycle_command(node: str, transition: str) -> str:
    """``'ros2 lifecycle set NODE T' (or 'sam3-agent lifecycle T --node NODE')``."""
    return (f"'ros2 lifecycle set {node} {transition}' "
            f"(or 'sam3-agent lifecycle {transition} --node {node}')")


def manual_start(node: str) -> str:
    """Logged once when ``autostart`` is false: the node waits for these two transitions."""
    return (f"autostart is false: {node} stays unconfigured until told. Configure it, then "
            f"activate it: 'ros2 lifecycle set {node} configure' then 'ros2 lifecycle set {node} "
            f"activate'; without the ros2 CLI: 'sam3-agent lifecycle configure --node {node}' "
            f"then 'sam3-agent lifecycle activate --node {node}'")


def fix_parameters(problems: Sequence[Problem], node: str) -> str:
    """How to get past ``problems``: a restart when one of them concerns a read-only or unknown
    parameter (no runtime set can fix it), else a set and a configure."""
    restart = sorted({p.name for p in problems if p.fixed_by_restart and p.name})
    if restart:
        named = ", ".join(name if name in PARAMETERS_BY_NAME else f"{name} (not a parameter: "
                          "remove or correct it)" for name in restart)
        return (f"restart the node with corrected start-up values ({RESTART_HOW}) for: {named}; "
                "a read-only or unknown parameter cannot be fixed at runtime")
    return (f"set corrected values ('ros2 param set {node} NAME VALUE'), then configure: "
            f"{lifecycle_command(node, 'configure')}")


def fix_backends(node: str) -> str:
    """After the backends failed to build: their parameters are read-only, the rest is outside
    the node (a file, the key's variable, a device)."""
    return ("the backends come from read-only parameters (llm.*, segmenter.*): if one is wrong, "
            f"restart the node with a corrected value ({RESTART_HOW}); if the cause is outside "
            f"the node (a missing file or key variable, a device), fix it and configure again: "
            f"{lifecycle_command(node, 'configure')}")


# What the node does after autostart failed (ros/node.py main): it ends, so launch, systemd or a
# supervisor see it die instead of a process that looks alive and never answers.
EXITING = "the node exits with status 1 (with autostart false it would stay up, unconfigured)"


def autostart_failed(node: str, restart_only: bool) -> str:
    """The autostart error after a failed configure (which logged what to do): the process then
    exits. Unless only a restart helps, say how to fix it in place instead: start it with
    autostart false, then configure and activate it."""
    if restart_only:
        return f"autostart: configure failed (see above); {EXITING}"
    return (f"autostart: configure failed (see above); {EXITING}. To fix it in place, start it "
            f"with autostart:=false, fix the cause, configure it, then activate it: "
            f"{lifecycle_command(node, 'activate')}")

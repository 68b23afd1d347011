"""Reading parameters from outside: ROS 2 params YAML files (``load_params_file``), ``-p
NAME:=VALUE`` overrides (``parse_override``, string arrays through the bounded flat-list parser)
and the nesting of dotted names ROS YAML uses (``flatten`` / ``nest``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from sam3_agent_ros import param_values
from sam3_agent_ros.config.table import NODE_NAME, PARAMETERS_BY_NAME, unknown_parameter_message
from sam3_agent_ros.param_values import ConfigError


def flatten(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"llm": {"model": "x"}}`` -> ``{"llm.model": "x"}`` (ROS YAML nests dotted names)."""
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(flatten(value, name + "."))
        else:
            flat[name] = value
    return flat


def nest(flat: dict[str, Any]) -> dict[str, Any]:
    """``{"llm.model": "x"}`` -> ``{"llm": {"model": "x"}}`` (the inverse of ``flatten``)."""
    tree: dict[str, Any] = {}
    for name, value in flat.items():
        *parents, key = name.split(".")
        node = tree
        for parent in parents:
            node = node.setdefault(parent, {})
        node[key] = value
    return tree


def load_params_file(path: str | Path, node_name: str = NODE_NAME) -> dict[str, Any]:
    """Read a ROS 2 parameters YAML (``sam3_agent: ros__parameters:`` or ``/**: ...``).

    Entries for ``/**``, the node name (with or without namespace) are merged in that order.
    """
    path = Path(path)
    try:
        tree = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise ConfigError(f"cannot read params file {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"params file {path} is not valid YAML: {exc}") from None
    if not isinstance(tree, dict):
        raise ConfigError(f"params file {path}: expected '<node>: ros__parameters: {{...}}'")
    params: dict[str, Any] = {}
    matched = False
    for key in sorted(tree, key=lambda k: k != "/**"):
        entry = tree[key]
        if str(key) == "/**" or str(key).rstrip("/").split("/")[-1] == node_name:
            if not isinstance(entry, dict) or "ros__parameters" not in entry:
                raise ConfigError(f"params file {path}: '{key}' has no 'ros__parameters' mapping")
            params.update(flatten(entry["ros__parameters"] or {}))
            matched = True
    if not matched:
        raise ConfigError(
            f"params file {path}: no '{node_name}:' or '/**:' section with ros__parameters")
    return params


def parse_override(text: str) -> tuple[str, Any]:
    """``"llm.model:=qwen"`` -> ``("llm.model", "qwen")`` (scalars stay as YAML reads them,
    coerced later); a string-array parameter's ``[a, b]`` -> ``["a", "b"]`` (bounded)."""
    name, sep, value = text.partition(":=")
    if not sep or not name.strip():
        raise ConfigError(f"bad override {text!r}: expected NAME:=VALUE")
    name = name.strip()
    if name not in PARAMETERS_BY_NAME:
        raise ConfigError(unknown_parameter_message(name))
    if PARAMETERS_BY_NAME[name].type is tuple:
        return name, param_values.flat_list_from_text(name, value)
    return name, _yaml_scalar(value)


def _yaml_scalar(value: str) -> Any:
    """Interpret an override value like ROS does (YAML scalar), keeping plain strings intact."""
    if len(value) > param_values.MAX_TEXT_CHARS:
        return value  # refused as too long by the parameter's check, never parsed
    try:
        parsed = yaml.safe_load(value)
    except (yaml.YAMLError, RecursionError):
        return value
    if parsed is None:
        return ""
    return parsed if isinstance(parsed, (bool, int, float, str)) else value

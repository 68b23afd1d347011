"""ROS parameters of the node, declared once from ``config.PARAMETERS``.

Each parameter gets a descriptor with its description, its allowed values (in
``additional_constraints``) and its range (``FloatingPointRange`` / ``IntegerRange``), so
``ros2 param describe`` shows the same text as the YAML file and the README.

A bad value in a params file must not crash the node at start-up: rclpy raises while declaring a
parameter whose override has the wrong type or is out of range. ``declare_parameters`` catches
that, keeps the default, and returns the reason; the node then refuses to configure with it.
An integer given for a floating-point parameter (``timeout_s: 60``) is accepted as 60.0.
"""

from __future__ import annotations

import sys
from typing import Any

from rcl_interfaces.msg import (
    FloatingPointRange,
    IntegerRange,
    ParameterDescriptor,
    SetParametersResult,
)
from rclpy.exceptions import InvalidParameterTypeException, InvalidParameterValueException

from sam3_agent_ros.config import PARAMETERS, PARAMETERS_BY_NAME, Config, ConfigError, Parameter

_INT64_MAX = 2**63 - 1


def descriptor_for(param: Parameter) -> ParameterDescriptor:
    """The ROS descriptor of one parameter (description, allowed values, range)."""
    descriptor = ParameterDescriptor(name=param.name, description=param.description)
    constraints = []
    if param.choices is not None:
        constraints.append("one of: " + ", ".join(repr(c) for c in param.choices))
        if param.free_form_hint == "plugin":
            constraints.append("or a plugin 'package.module:factory'")
    if param.type is float and (param.min is not None or param.max is not None):
        low = float(param.min) if param.min is not None else -sys.float_info.max
        high = float(param.max) if param.max is not None else sys.float_info.max
        descriptor.floating_point_range = [
            FloatingPointRange(from_value=low, to_value=high, step=0.0)]
        constraints.append(_range_text(param))
    elif param.type is int and (param.min is not None or param.max is not None):
        low = int(param.min) if param.min is not None else -_INT64_MAX
        high = int(param.max) if param.max is not None else _INT64_MAX
        descriptor.integer_range = [IntegerRange(from_value=low, to_value=high, step=0)]
        constraints.append(_range_text(param))
    descriptor.additional_constraints = "; ".join(constraints)
    return descriptor


def _range_text(param: Parameter) -> str:
    if param.max is None:
        return f">= {param.min}"
    if param.min is None:
        return f"<= {param.max}"
    return f"{param.min} .. {param.max}"


def declare_parameters(node: Any) -> list[str]:
    """Declare every parameter on ``node``; return the reasons of rejected overrides (if any).

    A rejected override is replaced by the default so the node still starts; the caller must not
    configure while reasons are pending (the user fixes the value and reconfigures).
    """
    problems = []
    overrides = getattr(node, "_parameter_overrides", {})
    for param in PARAMETERS:
        descriptor = descriptor_for(param)
        try:
            node.declare_parameter(param.name, param.default, descriptor)
            continue
        except (InvalidParameterTypeException, InvalidParameterValueException) as exc:
            given = overrides[param.name].value if param.name in overrides else None
            try:
                value = param.validate(given)  # e.g. an int for a float parameter
                node.declare_parameter(param.name, value, descriptor, ignore_override=True)
                continue
            except (ConfigError, InvalidParameterTypeException, InvalidParameterValueException):
                problems.append(_declare_problem(param, given, exc))
        node.declare_parameter(param.name, param.default, descriptor, ignore_override=True)
    return problems


def _declare_problem(param: Parameter, given: Any, exc: Exception) -> str:
    try:
        param.validate(given)
    except ConfigError as reason:
        return str(reason)
    return f"{param.name}: {given!r} rejected ({exc})"


def current_values(node: Any) -> dict[str, Any]:
    """``{name: value}`` of every declared parameter of the table."""
    return {p.name: node.get_parameter(p.name).value for p in PARAMETERS}


def problems(values: dict[str, Any]) -> list[str]:
    """Every reason ``values`` is not a valid configuration (empty when it is)."""
    found = []
    for name, value in values.items():
        param = PARAMETERS_BY_NAME.get(name)
        if param is None:
            continue
        try:
            param.validate(value)
        except ConfigError as exc:
            found.append(str(exc))
    if not found:
        try:
            Config.from_params(values)
        except ConfigError as exc:  # relations between parameters (depth.min_m < depth.max_m)
            found.append(str(exc))
    return found


def read_config(node: Any) -> Config:
    """The node's parameters as a validated ``Config`` (raises ``ConfigError`` with the reason)."""
    return Config.from_params(current_values(node))


def validate_changes(current: dict[str, Any], changes: list[Any]) -> SetParametersResult:
    """An ``add_on_set_parameters_callback`` body: accept ``changes`` (rclpy Parameters) when each
    value is valid and the change adds no new problem to the configuration (so one bad value can
    be fixed while another is still pending); the reason says which value is wrong and why."""
    values = dict(current)
    for change in changes:
        param = PARAMETERS_BY_NAME.get(change.name)
        if param is None:
            continue  # parameters rclpy adds itself (use_sim_time, ...)
        try:
            param.validate(change.value)
        except ConfigError as exc:
            return SetParametersResult(successful=False, reason=str(exc))
        values[change.name] = change.value
    new = [reason for reason in problems(values) if reason not in problems(current)]
    if new:
        return SetParametersResult(successful=False, reason="; ".join(new))
    return SetParametersResult(successful=True)

"""Parameter values between the command line and a node's parameter services: a command-line
text read as the declared type (``parse_parameter_text``; bounded, a string list read flat:
``param_values.flat_list_from_text``), the ``rcl_interfaces/ParameterValue`` of a value, and
how values and descriptors are printed (``sam3-agent param``)."""

from __future__ import annotations

import json
import math
from typing import Any

from sam3_agent_ros.param_values import (
    MAX_LIST_TEXT_CHARS,
    ConfigError,
    flat_list_from_text,
    shown,
)


def parse_parameter_text(text: str, parameter_type: int) -> Any:
    """A command-line value for a parameter of ``parameter_type`` (rcl_interfaces
    ``ParameterType``): ``12`` for a double is 12.0, ``[a, b]`` for a string array is a list,
    ``true`` for a string stays the text ``true``. ``ValueError`` says what was expected."""
    import yaml
    from rcl_interfaces.msg import ParameterType as T

    if parameter_type == T.PARAMETER_STRING:
        return text
    if len(text) > MAX_LIST_TEXT_CHARS:  # the local user's text, bounded all the same
        raise ValueError(f"the value has {len(text)} characters, more than "
                         f"{MAX_LIST_TEXT_CHARS}")
    if parameter_type == T.PARAMETER_STRING_ARRAY:  # a flat list, never nested
        try:
            return flat_list_from_text("value", text) if text.strip() else []
        except ConfigError:
            raise ValueError(f"{shown(text)} is not a list of strings, e.g. [a, b]") from None
    try:
        value = yaml.safe_load(text) if text.strip() else None
    except (yaml.YAMLError, RecursionError) as exc:
        raise ValueError(f"{shown(text)} is not a value ({exc.__class__.__name__})") from None
    expected = {T.PARAMETER_BOOL: "true or false", T.PARAMETER_INTEGER: "an integer",
                T.PARAMETER_DOUBLE: "a number", T.PARAMETER_BYTE_ARRAY: "a list of bytes",
                T.PARAMETER_BOOL_ARRAY: "a list of true/false",
                T.PARAMETER_INTEGER_ARRAY: "a list of integers",
                T.PARAMETER_DOUBLE_ARRAY: "a list of numbers",
                T.PARAMETER_STRING_ARRAY: "a list of strings, e.g. [a, b]"}

    def scalar(item: Any, kind: int) -> Any:
        if kind == T.PARAMETER_BOOL and isinstance(item, bool):
            return item
        if kind == T.PARAMETER_INTEGER and isinstance(item, int) and not isinstance(item, bool):
            return item
        if kind == T.PARAMETER_DOUBLE and isinstance(item, (int, float)) \
                and not isinstance(item, bool):
            return float(item)
        if kind == T.PARAMETER_STRING:
            return item if isinstance(item, str) else json.dumps(item)
        raise ValueError

    element = {T.PARAMETER_BOOL_ARRAY: T.PARAMETER_BOOL,
               T.PARAMETER_INTEGER_ARRAY: T.PARAMETER_INTEGER,
               T.PARAMETER_BYTE_ARRAY: T.PARAMETER_INTEGER,
               T.PARAMETER_DOUBLE_ARRAY: T.PARAMETER_DOUBLE,
               T.PARAMETER_STRING_ARRAY: T.PARAMETER_STRING}
    try:
        if parameter_type in element:
            if not isinstance(value, list):
                raise ValueError
            return [scalar(item, element[parameter_type]) for item in value]
        if parameter_type in expected:
            return scalar(value, parameter_type)
    except ValueError:
        raise ValueError(f"{text!r} is not {expected[parameter_type]}") from None
    raise ValueError(f"parameter type {parameter_type} cannot be set from the command line")


def rclpy_parameter(name: str, value: Any, parameter_type: int) -> Any:
    """An ``rclpy.parameter.Parameter`` of ``parameter_type`` (rcl_interfaces ``ParameterType``)
    holding ``value`` as ``parse_parameter_text`` gives it (a byte array's integers become the
    one-byte ``bytes`` rclpy wants); ``ValueError`` when it does not fit the type."""
    from rclpy.parameter import Parameter

    kind = Parameter.Type(parameter_type)
    if kind == Parameter.Type.BYTE_ARRAY:
        value = [bytes([item]) for item in value]
    if not kind.check(value):
        raise ValueError(f"{shown(format_value(value))} is not a {kind.name.lower()} value")
    return Parameter(name, kind, value)


def format_value(value: Any) -> str:
    """A parameter value as one line: strings as they are, the rest as JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, (list, tuple)):
        return json.dumps([v.hex() if isinstance(v, bytes) else v for v in value])
    return json.dumps(value)


def describe_lines(name: str, descriptor: Any) -> list[str]:
    """``param describe``: the descriptor as ``key: value`` lines."""
    from rcl_interfaces.msg import ParameterType

    types = {value: key.removeprefix("PARAMETER_").lower()
             for key, value in vars(ParameterType).items()
             if key.startswith("PARAMETER_") and isinstance(value, int)}
    lines = [f"parameter: {name}", f"type: {types.get(descriptor.type, descriptor.type)}",
             f"description: {descriptor.description}"]
    if descriptor.additional_constraints:
        lines.append(f"constraints: {descriptor.additional_constraints}")
    for kind, ranges in (("integer range", descriptor.integer_range),
                         ("floating point range", descriptor.floating_point_range)):
        for r in ranges:
            step = f", step {r.step:g}" if r.step else ""
            lines.append(f"{kind}: {r.from_value:g} .. {r.to_value:g}{step}")
    lines.append(f"read only: {str(bool(descriptor.read_only)).lower()}")
    if getattr(descriptor, "dynamic_typing", False):
        lines.append("dynamic typing: true")
    return lines

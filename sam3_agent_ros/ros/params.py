"""ROS parameters of the node, declared once from ``config.PARAMETERS``.

Each parameter gets a descriptor with its description, its allowed values (in
``additional_constraints``), its range (``FloatingPointRange`` / ``IntegerRange``) and
``read_only`` (config.py says which parameters are), so ``ros2 param describe`` shows the same
text as the YAML file and the README.

A bad value in a params file must not crash the node at start-up: rclpy raises while declaring a
parameter whose override has the wrong type or is out of range. ``declare_parameters`` catches
that, keeps the default, and returns the reason; the node then refuses to configure with it.
An integer given for a floating-point parameter (``timeout_s: 60``) is accepted as 60.0.
Overrides of names the node does not know (a typo: ``llm.backnd``) are problems too
(``unknown_overrides``). A problem of a read-only or unknown parameter is only fixed by a restart
with a corrected value; the others by a runtime set (``Problem.fixed_by_restart``).

``ReadOnlyParameters`` (a mixin for the node) answers a runtime set of a read-only parameter
with a reason that says how to change it, and turns anything a set raises (a callback, rclpy's
own checks) into a refusal with the reason: a peer's value never takes the node down.
``guard_parameter_services`` does the same for what rclpy does before any of it (reading the
request: a value of an unknown type raises there).

Credentials in ``llm.base_url`` are refused at start-up: the parameter is declared with the URL
redacted (never with the secret, which the parameter services and ``/parameter_events`` would hand
to any peer), and the node cannot configure until it is restarted with the key in the variable
named by ``llm.api_key_env``.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rcl_interfaces.msg import (
    FloatingPointRange,
    IntegerRange,
    ParameterDescriptor,
    SetParametersResult,
)
from rclpy.exceptions import (
    InvalidParameterTypeException,
    InvalidParameterValueException,
    ParameterNotDeclaredException,
)
from rclpy.parameter import Parameter as RosParameter

from sam3_agent_ros.backends import base_url_credentials_problem
from sam3_agent_ros.config import (
    PARAMETERS,
    PARAMETERS_BY_NAME,
    READ_ONLY_NOTE,
    Config,
    ConfigError,
    Parameter,
    unknown_parameter_message,
)
from sam3_agent_ros.log_limit import limiter_of
from sam3_agent_ros.redact import redact_text
from sam3_agent_ros.ros import param_guard

_INT64_MAX = 2**63 - 1
# Parameters rclpy may declare itself, by prefix (use_sim_time and the like are declared before
# ours; qos_overrides.* only when an entity asks for them): known, never refused as typos.
RCLPY_PARAMETER_PREFIXES = ("qos_overrides.",)
SHOWN_CHARS = 80  # longest text of a value in a log line (a value can be 1 MB)


@dataclass(frozen=True)
class Problem:
    """Why the node cannot configure. ``name``: the parameter concerned (None: a relation
    between several)."""

    name: str | None
    text: str

    @property
    def fixed_by_restart(self) -> bool:
        """Read-only and unknown parameters cannot be corrected at runtime."""
        if self.name is None:
            return False
        param = PARAMETERS_BY_NAME.get(self.name)
        return param is None or param.read_only

    def __str__(self) -> str:
        return self.text


def descriptor_for(param: Parameter) -> ParameterDescriptor:
    """The ROS descriptor of one parameter (description, allowed values, range, read-only)."""
    descriptor = ParameterDescriptor(name=param.name, description=param.description,
                                     read_only=param.read_only)
    constraints = []
    if param.type is tuple:
        # A list of strings, typed by our own check: rclpy types an empty list by its first
        # reader (a byte array in Python, a bool array from `ros2 param set ... "[]"`, no value
        # from YAML), so with a fixed type the list could never be emptied at runtime.
        descriptor.dynamic_typing = True
        constraints.append("a list of strings")
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
    if param.read_only:
        constraints.append(READ_ONLY_NOTE)
    descriptor.additional_constraints = "; ".join(constraints)
    return descriptor


def _range_text(param: Parameter) -> str:
    if param.max is None:
        return f">= {param.min}"
    if param.min is None:
        return f"<= {param.max}"
    return f"{param.min} .. {param.max}"


def declare_parameters(node: Any) -> list[Problem]:
    """Declare every parameter on ``node``; return the reasons of rejected overrides (if any).

    A rejected override is replaced by the default so the node still starts; the caller must not
    configure while reasons are pending (the user fixes the value, at runtime or by a restart for
    a read-only parameter, and configures again).
    """
    problems = []
    overrides = getattr(node, "_parameter_overrides", {})
    for param in PARAMETERS:
        descriptor = descriptor_for(param)
        if param.type is tuple:
            problems += _declare_string_array(node, param, descriptor)
            continue
        secret = _credentials_in_override(param, overrides)
        if secret is not None:  # declared redacted: no service or event ever holds the secret
            redacted, reason = secret
            node.declare_parameter(param.name, redacted, descriptor, ignore_override=True)
            problems.append(Problem(param.name, reason))
            continue
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


def _credentials_in_override(param: Parameter, overrides: dict) -> tuple[str, str] | None:
    """``(the URL redacted, the refusal)`` when the start-up value of ``llm.base_url`` carries
    credentials, else None."""
    if param.name != "llm.base_url" or param.name not in overrides:
        return None
    given = overrides[param.name].value
    key_env = overrides.get("llm.api_key_env")
    key_env = PARAMETERS_BY_NAME["llm.api_key_env"].default if key_env is None else key_env.value
    if not isinstance(given, str) or not isinstance(key_env, str):
        return None  # a wrong type: the usual problem
    reason = base_url_credentials_problem(given, key_env)
    return None if reason is None else (redact_text(given), reason)


def _declare_string_array(node: Any, param: Parameter,
                          descriptor: ParameterDescriptor) -> list[Problem]:
    """A string-array parameter (dynamically typed, see ``descriptor_for``): an override that is
    not a list of strings is a problem and the default replaces it; an empty list of whatever
    type (or no value: an empty YAML list) is the empty string array."""
    declared = node.declare_parameter(param.name, list(param.default), descriptor)
    problems = []
    try:
        value = list(param.validate(declared.value))
    except ConfigError as exc:
        problems.append(Problem(param.name, str(exc)))
        value = list(param.default)
    if declared.type_ != RosParameter.Type.STRING_ARRAY or value != declared.value:
        node.set_parameters([RosParameter(param.name, RosParameter.Type.STRING_ARRAY, value)])
    return problems


def typed_string_arrays(parameters: list[Any]) -> list[Any]:
    """A pre-set callback (``Node.add_pre_set_parameters_callback``, rclpy of Iron and later):
    an empty array of another type set on a string-array parameter (``ros2 param set NODE
    concepts.prompts "[]"`` sends an empty bool array), or no value (``ros2 param load`` of a
    file with ``prompts: []``; rclpy would undeclare the parameter), becomes an empty string
    array, so the parameter stays declared with its type (``sam3-agent param set`` reads it to
    convert a value)."""
    string_array = RosParameter.Type.STRING_ARRAY
    out = []
    for parameter in parameters:
        param = PARAMETERS_BY_NAME.get(parameter.name)
        value = parameter.value
        empty = value is None or (not isinstance(value, (str, bytes))
                                  and hasattr(value, "__len__") and len(value) == 0)
        if param is not None and param.type is tuple and parameter.type_ != string_array \
                and empty:
            parameter = RosParameter(parameter.name, string_array, [])
        out.append(parameter)
    return out


def _declare_problem(param: Parameter, given: Any, exc: Exception) -> Problem:
    try:
        param.validate(given)
    except ConfigError as reason:
        return Problem(param.name, str(reason))
    return Problem(param.name, f"{param.name}: {shown(given)} rejected ({exc})")


def unknown_overrides(node: Any) -> list[Problem]:
    """Overrides (params file, ``-p``, launch) of names that nothing declared: typos, refused.

    Call after ``declare_parameters``: rclpy's own parameters (use_sim_time,
    start_type_description_service, ...) are declared by then; ``qos_overrides.*`` are known.
    """
    overrides = getattr(node, "_parameter_overrides", {})
    return [Problem(name, unknown_parameter_message(name)) for name in sorted(overrides)
            if not node.has_parameter(name) and not name.startswith(RCLPY_PARAMETER_PREFIXES)]


def current_values(node: Any) -> dict[str, Any]:
    """``{name: value}`` of every declared parameter of the table."""
    return {p.name: node.get_parameter(p.name).value for p in PARAMETERS}


def problems(values: dict[str, Any]) -> list[Problem]:
    """Every reason ``values`` is not a valid configuration (empty when it is)."""
    found = []
    for name, value in values.items():
        param = PARAMETERS_BY_NAME.get(name)
        if param is None:
            continue
        try:
            param.validate(value)
        except ConfigError as exc:
            found.append(Problem(name, str(exc)))
    if not found:
        try:
            Config.from_params(values)
        except ConfigError as exc:  # relations between parameters (depth.min_m < depth.max_m)
            found.append(Problem(None, str(exc)))
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
    new = [problem.text for problem in problems(values) if problem not in problems(current)]
    if new:
        return SetParametersResult(successful=False, reason="; ".join(new))
    return SetParametersResult(successful=True)


def on_set_parameters(node: Any, changes: list[Any], configured: bool) -> SetParametersResult:
    """The node's set-parameters callback: validate a runtime change of dynamic parameters
    (read-only ones never get here: ``ReadOnlyParameters``), log a refusal, or each accepted
    change once with its old and new value (``configured``: it takes effect at the next
    configure). Nothing after this callback can refuse the change (rclpy checked the descriptors
    before)."""
    current = current_values(node)
    result = validate_changes(current, changes)
    if not result.successful:
        param_guard.log_refusal(node, result.reason)
        return result
    table = [change for change in changes if change.name in PARAMETERS_BY_NAME]
    limiter, info = limiter_of(node), node.get_logger().info  # a peer can set in a loop
    for change, line in zip(table, change_lines(current, table)):
        limiter.emit("parameter changed", info,
                     f"parameter changed: {line}{_takes_effect(change.name, configured)}")
    return result


def _takes_effect(name: str, configured: bool) -> str:
    """When a change of ``name`` on a configured node applies: at once (``live`` parameters),
    or at the next configure."""
    if not configured:
        return ""
    if PARAMETERS_BY_NAME[name].applies == "now":
        return " (applied now)"
    return " (takes effect at the next configure: deactivate, cleanup, configure, activate)"


def shown(value: Any, limit: int = SHOWN_CHARS) -> str:
    """``value`` for a log line: quoted and escaped (a newline cannot forge a log line), and cut
    to ``limit`` characters with the full length said."""
    text = redact_text(repr(value))
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text)} chars)"


def change_lines(current: dict[str, Any], changes: list[Any]) -> list[str]:
    """One log line per accepted change of a table parameter: ``NAME: OLD -> NEW``."""
    return [f"{change.name}: {shown(current.get(change.name))} -> {shown(change.value)}"
            for change in changes if change.name in PARAMETERS_BY_NAME]


def read_only_reason(names: list[str]) -> str:
    """The answer to a runtime set of read-only parameters: how to change them instead."""
    return (f"{', '.join(names)} {'is' if len(names) == 1 else 'are'} read-only after start-up: "
            "restart the node with the new value in its params file, a launch argument or "
            f"-p {names[0]}:=VALUE")


if TYPE_CHECKING:  # what the mixin below is mixed into, for the type checker
    from rclpy.node import Node as _MixedInto
else:
    _MixedInto = object


class ReadOnlyParameters(_MixedInto):
    """Mixin for an rclpy ``Node``: a runtime set of a read-only parameter answers
    ``read_only_reason`` and sets nothing.

    rclpy refuses such a set too, but before any ``on_set_parameters`` callback and with its own
    reason ('Trying to set a read-only parameter: NAME.'), which does not say how to change the
    value. Every runtime set goes through the two public methods below (rclpy's parameter
    services call ``set_parameters_atomically``, once per parameter for ``set_parameters``
    requests; in-process code calls either), so the check sits there, before rclpy's; everything
    else is rclpy's own path, and its read-only check stays as a backstop.
    """

    def set_parameters(self, parameter_list: list[Any]) -> list[SetParametersResult]:
        # One parameter at a time, as rclpy does: the others of the list are still set.
        return [self.set_parameters_atomically([parameter]) for parameter in parameter_list]

    def set_parameters_atomically(self, parameter_list: list[Any]) -> SetParametersResult:
        """Every refusal is logged once (rate-limited, ``param_guard.log_refusal``): also
        rclpy's own, which say nothing (a value outside its descriptor's range)."""
        param_guard.forget_logged()
        try:
            result = self._read_only_refusal(parameter_list) or super().set_parameters_atomically(
                parameter_list)
        except ParameterNotDeclaredException:
            raise  # rclpy's parameter services answer it themselves
        except Exception as exc:  # noqa: BLE001 (a callback's or rclpy's: never out of a set)
            return param_guard.refusal(self, [getattr(p, "name", "?") for p in parameter_list],
                                       exc)
        if not result.successful and not param_guard.refusal_logged(result.reason):
            param_guard.log_refusal(self, result.reason)
        return result

    def _read_only_refusal(self, parameter_list: list[Any]) -> SetParametersResult | None:
        names = [p.name for p in parameter_list
                 if self.has_parameter(p.name) and self.describe_parameter(p.name).read_only]
        if not names:
            return None
        reason = read_only_reason(names)
        param_guard.log_refusal(self, reason)
        return SetParametersResult(successful=False, reason=reason)


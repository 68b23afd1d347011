"""One parameter's declaration (``Parameter``): its name, default, description, allowed values or
range, and the coercion and check every value given for it passes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sam3_agent_ros import param_values
from sam3_agent_ros.param_values import ConfigError, shown


@dataclass(frozen=True)
class Parameter:
    name: str
    default: Any
    description: str
    choices: tuple | None = None
    min: float | None = None
    max: float | None = None
    # A choice may also be free-form when it matches this predicate (segmenter plugins).
    free_form_hint: str = ""
    # Fixed at start-up (params file, launch argument, -p); never settable at runtime. The rule
    # for which parameters must be is written above PARAMETERS.
    read_only: bool = False
    # A runtime change applies at once (the others at the next configure).
    live: bool = False

    @property
    def type(self) -> type:
        return type(self.default)

    @property
    def applies(self) -> str:
        """When a runtime change applies: ``"now"`` (live), ``"configure"`` (the next lifecycle
        configure), ``"restart"`` (read-only: a runtime set is refused)."""
        return "restart" if self.read_only else "now" if self.live else "configure"

    def validate(self, value: Any) -> Any:
        """Return ``value`` coerced to this parameter's type, or raise ``ConfigError``."""
        value = _coerce(self, value)
        problem = (param_values.text_problem(self.name, value) if isinstance(value, str) else
                   param_values.number_problem(self.name, value) if isinstance(value, float)
                   else None)
        if problem:
            raise ConfigError(problem)
        is_plugin = self.free_form_hint == "plugin" and isinstance(value, str) and ":" in value
        if self.choices is not None and value not in self.choices and not is_plugin:
            allowed = ", ".join(repr(c) for c in self.choices)
            extra = " or a plugin 'package.module:factory'" if self.free_form_hint else ""
            raise ConfigError(f"{self.name}: {shown(value)} is not one of {allowed}{extra}")
        if self.min is not None and value < self.min:
            raise ConfigError(f"{self.name}: {shown(value)} is below the minimum {self.min}")
        if self.max is not None and value > self.max:
            raise ConfigError(f"{self.name}: {shown(value)} is above the maximum {self.max}")
        return value


def _coerce(param: Parameter, value: Any) -> Any:
    kind = param.type
    if kind is tuple:
        return param_values.string_list(param.name, value)
    if kind is str and isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, str) and kind is not str:
        text = value.strip()
        if kind is bool:
            lowered = text.lower()
            if lowered in ("true", "1", "yes", "on"):
                return True
            if lowered in ("false", "0", "no", "off"):
                return False
            raise ConfigError(f"{param.name}: {shown(value)} is not a boolean (true/false)")
        try:
            return kind(text)
        except ValueError:
            raise ConfigError(f"{param.name}: {shown(value)} is not {_TYPE_NAMES[kind]}") from None
    if kind is bool:
        if isinstance(value, bool):
            return value
        raise ConfigError(f"{param.name}: {shown(value)} is not a boolean (true/false)")
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if kind is int and isinstance(value, float) and value.is_integer():
        return int(value)
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise ConfigError(f"{param.name}: {shown(value)} is not {_TYPE_NAMES[kind]}")
    return value


_TYPE_NAMES = {int: "an integer", float: "a number", str: "a string", bool: "a boolean"}

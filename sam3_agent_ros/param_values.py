"""The checks of parameter values that must hold whatever sends them: a peer's runtime set (any
participant on the DDS domain), a params file, ``-p NAME:=VALUE``.

Every check is bounded by the size of what it is given and looks at the value as given (the raw
text, before any strip), so a value cannot cost more than its own length:

- ``string_list``: a string-array parameter (``concepts.prompts``) is a list of strings and
  nothing else; a string is never read as YAML here (a peer's ``"[[[[..."`` would raise
  ``RecursionError``, an alias bomb would take seconds and hundreds of MB).
- ``text_problem`` / ``number_problem``: a string parameter holds at most ``MAX_TEXT_CHARS``
  characters; a floating-point parameter is finite.
- ``flat_list_from_text``: the command line's ``-p concepts.prompts:="[a, b]"`` (the local user's
  text, rcl parses the node's own): bounded in size, read by the YAML composer only as a flat
  list of scalars (no nesting, so no alias can expand).

Nothing of the package is imported (``config`` builds on this).
"""

from __future__ import annotations

import math
import reprlib
from typing import Any

# Longest value of a string parameter (a model name, a device, a path: Linux PATH_MAX is 4096).
MAX_TEXT_CHARS = 4096
# Longest command-line text of a list (``-p concepts.prompts:="[...]"``).
MAX_LIST_TEXT_CHARS = 65536


class ConfigError(ValueError):
    """An invalid parameter name or value; the message names the parameter and the fix."""


_REPR = reprlib.Repr()  # bounded at every level: a list of megabyte strings costs nothing
_REPR.maxstring = _REPR.maxother = 60
_REPR.maxlist = _REPR.maxtuple = 6
_REPR.maxlevel = 3


def shown(value: Any, limit: int = 60) -> str:
    """``repr(value)`` within ``limit`` characters, never built whole (a value may be
    megabytes, or a list of them)."""
    text = _REPR.repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def string_list(name: str, value: Any) -> tuple[str, ...]:
    """A string-array value as a tuple. Accepted: a list or tuple of strings; an empty array of
    any type, and None (ROS reads an empty YAML list ``[]`` as a parameter without a value)."""
    if value is None:
        return ()
    if isinstance(value, (list, tuple)):
        if len(value) == 0 or all(isinstance(v, str) for v in value):
            return tuple(value)
    elif not isinstance(value, (str, bytes)) and hasattr(value, "__len__") and len(value) == 0:
        return ()  # an empty array of any element type (ROS types an empty list as it likes)
    raise ConfigError(f"{name}: {shown(value)} is not a list of strings (e.g. ['cup', "
                      "'red ball'])")


def text_problem(name: str, value: str) -> str | None:
    """A string parameter longer than ``MAX_TEXT_CHARS`` (as given) is refused."""
    if len(value) > MAX_TEXT_CHARS:
        return (f"{name}: {len(value)} characters, more than the {MAX_TEXT_CHARS} a string "
                "parameter may hold")
    return None


def number_problem(name: str, value: float) -> str | None:
    """NaN and the infinities are refused (every comparison with NaN is false: no range holds)."""
    if not math.isfinite(value):
        return f"{name}: {value!r} is not a finite number"
    return None


def flat_list_from_text(name: str, text: str, unquote: bool = True) -> list[str]:
    """``"[cup, 'red, ball']"`` -> ``["cup", "red, ball"]``: a YAML flow list of scalars, each
    kept as its text; the list may be quoted once (``-p 'NAME:="[a, b]"'`` without a shell).
    Longer than ``MAX_LIST_TEXT_CHARS``, nested, or not a list: ConfigError."""
    import yaml

    if len(text) > MAX_LIST_TEXT_CHARS:
        raise ConfigError(f"{name}: the list is {len(text)} characters long, more than "
                          f"{MAX_LIST_TEXT_CHARS}")
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except (yaml.YAMLError, RecursionError) as exc:
        raise ConfigError(f"{name}: {shown(text)} is not a list (e.g. \"[cup, red ball]\"): "
                          f"{type(exc).__name__}") from None
    if root is None:
        return []
    if unquote and isinstance(root, yaml.ScalarNode) and root.style in ("'", '"'):
        return flat_list_from_text(name, root.value, unquote=False)
    if not isinstance(root, yaml.SequenceNode) or not all(
            isinstance(item, yaml.ScalarNode) for item in root.value):
        raise ConfigError(f"{name}: {shown(text)} is not a flat list of strings (e.g. "
                          "\"[cup, red ball]\")")
    return [item.value for item in root.value]

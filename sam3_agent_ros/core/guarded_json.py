"""JSON from a peer or a model, parsed with bounds: ``loads(text)`` or ``JsonRefused``.

Python's ``json`` fails in ways that are not ``JSONDecodeError``: about 1000 levels of nesting
raise ``RecursionError`` and an integer of more than 4300 digits raises a plain ``ValueError``
(without that interpreter limit, converting it is quadratic). Our JSON (a query message, a tool
call) is a few levels deep with short numbers, so anything deeper or longer is refused before
``json.loads`` runs, by one linear scan that skips string contents. Every failure, decode errors
included, becomes one ``JsonRefused`` whose message says what is wrong and where.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any

MAX_DEPTH = 32  # nesting of arrays and objects
MAX_DIGITS = 64  # longest run of digits in a number

# The characters that matter to the scan: quotes, backslashes, brackets, and runs of digits.
_TOKEN = re.compile(r'["\\\[\]{}]|[0-9]+')


class JsonRefused(ValueError):
    """Text that is not JSON we accept; ``str(exc)`` is the reason (``reason`` too)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def loads(text: str, *, max_depth: int = MAX_DEPTH, max_digits: int = MAX_DIGITS) -> Any:
    """``json.loads(text)`` for text nested at most ``max_depth`` deep with numbers of at most
    ``max_digits`` digits; anything else raises ``JsonRefused``."""
    problem = shape_problem(text, max_depth, max_digits)
    if problem:
        raise JsonRefused(problem)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise JsonRefused(f"{exc.msg} at position {exc.pos}") from None
    except (RecursionError, ValueError) as exc:  # not expected after the scan; still refused
        raise JsonRefused(f"{type(exc).__name__}: {exc}") from None


def shape_problem(text: str, max_depth: int = MAX_DEPTH,
                  max_digits: int = MAX_DIGITS) -> str | None:
    """Why ``text`` is nested too deep or holds too long a number, or None. One pass over the
    quotes, backslashes, brackets and digits (linear, whatever the text); brackets and digits
    inside strings do not count. Text with few brackets and no long digit run (nearly all) is
    cleared by two C-speed checks first."""
    if (text.count("[") + text.count("{") <= max_depth
            and _digit_run(max_digits + 1).search(text) is None):
        return None
    depth = 0
    in_string = False
    escaped = -1  # the position of the character after a backslash, inside a string
    for token in _TOKEN.finditer(text):
        start = token.start()
        char = text[start]
        if in_string:
            if start == escaped:
                continue
            if char == "\\":
                escaped = start + 1
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > max_depth:
                return f"nested more than {max_depth} levels deep (at position {start})"
        elif char in "]}":
            depth = max(0, depth - 1)
        elif char.isdigit() and token.end() - start > max_digits:
            return (f"a number of {token.end() - start} digits, more than {max_digits} "
                    f"(at position {start})")
    return None


@functools.lru_cache(maxsize=8)
def _digit_run(length: int) -> re.Pattern[str]:
    return re.compile(f"[0-9]{{{length},}}")

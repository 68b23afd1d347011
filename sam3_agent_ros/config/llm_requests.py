"""Pure: what ``llm.extra_body`` and ``llm.extra_headers`` may hold (interface §14), checked at
start-up so that a bad value is refused with a reason instead of failing every request.

- ``llm.extra_body``: a JSON object (text of at most ``MAX_EXTRA_BYTES`` UTF-8 bytes) merged into
  every request body, e.g. ``{"cache_salt": "tenant-a"}`` or a router's hint. The keys the
  client sets itself (``CLIENT_BODY_KEYS``: model, messages, the token budget, temperature, the
  tools, ``priority`` (that is ``llm.priority``), and ``stream``, which the client cannot read)
  are refused: a merge would silently override what the agent depends on.
- ``llm.extra_headers``: a JSON object of string values (same bound) sent as HTTP headers with
  every request, e.g. a fairness id or an affinity key for a router. ``Authorization`` (the key
  comes from ``llm.api_key_env``, never a parameter) and ``Content-*`` (the client frames the
  body) are refused, and so are the headers the HTTP layer owns (``HOP_BY_HOP_HEADERS``); names
  must be HTTP tokens and values printable (no CR/LF: no header injection).

A text of at most 4096 bytes cannot cost more than its size to read; its nesting is bounded too
(``MAX_DEPTH``), as the server would otherwise be the one to choke on it.
"""

from __future__ import annotations

import json
import re
from typing import Any

from sam3_agent_ros.param_values import ConfigError, shown

MAX_EXTRA_BYTES = 4096
MAX_DEPTH = 16
CLIENT_BODY_KEYS = frozenset({"model", "messages", "max_tokens", "max_completion_tokens",
                              "temperature", "tools", "tool_choice", "priority", "stream",
                              "stream_options"})
HOP_BY_HOP_HEADERS = frozenset({"host", "connection", "transfer-encoding", "keep-alive",
                                "upgrade", "te", "trailer", "proxy-authorization"})
_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")  # RFC 9110 field-name


def extra_body(text: str, name: str = "llm.extra_body") -> dict[str, Any]:
    """The object ``text`` holds (``""``: none), or ``ConfigError`` naming the problem."""
    value = _json_object(text, name, 'e.g. {"cache_salt": "tenant-a"}')
    refused = sorted(key for key in value if key.lower() in CLIENT_BODY_KEYS)
    if refused:
        which = ", ".join(repr(k) for k in refused)
        hint = " (use llm.priority)" if "priority" in (k.lower() for k in refused) else ""
        owned = ", ".join(sorted(CLIENT_BODY_KEYS))
        raise ConfigError(f"{name}: {which} is set by the client itself and may not be "
                          f"overridden{hint}; the client sets {owned}")
    return value


def extra_headers(text: str, name: str = "llm.extra_headers") -> dict[str, str]:
    """The headers ``text`` holds (``""``: none), or ``ConfigError`` naming the problem."""
    value = _json_object(text, name, 'e.g. {"X-Tenant": "lab-a"}')
    headers: dict[str, str] = {}
    seen: set[str] = set()
    for header, content in value.items():
        lowered = header.lower()
        if not _TOKEN.match(header):
            raise ConfigError(f"{name}: {shown(header)} is not a valid HTTP header name")
        if lowered == "authorization":
            raise ConfigError(f"{name}: 'Authorization' may not be set here: the API key is "
                              "read from the environment variable named by llm.api_key_env")
        if lowered.startswith("content-"):
            raise ConfigError(f"{name}: {shown(header)} may not be set: the client frames the "
                              "request body (Content-* headers are its own)")
        if lowered in HOP_BY_HOP_HEADERS:
            raise ConfigError(f"{name}: {shown(header)} is managed by the HTTP layer and may "
                              "not be set")
        if lowered in seen:
            raise ConfigError(f"{name}: {shown(header)} is given twice")
        if not isinstance(content, str):
            raise ConfigError(f"{name}: the value of {shown(header)} is {shown(content)}, not a "
                              "string")
        if not content.isprintable():
            raise ConfigError(f"{name}: the value of {shown(header)} holds control characters")
        seen.add(lowered)
        headers[header] = content
    return headers


def _json_object(text: str, name: str, example: str) -> dict[str, Any]:
    if not text.strip():
        return {}
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_EXTRA_BYTES:
        raise ConfigError(f"{name}: {size} bytes, more than the {MAX_EXTRA_BYTES} allowed")
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ConfigError(f"{name}: not JSON ({exc}); write a JSON object, {example}") from None
    if not isinstance(value, dict):
        raise ConfigError(f"{name}: {shown(value)} is not a JSON object; {example}")
    if _depth(value) > MAX_DEPTH:
        raise ConfigError(f"{name}: nested deeper than {MAX_DEPTH} levels")
    return value


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0

"""Credentials out of URLs, wherever the package shows one (errors, logs, results, traces, eval).

A URL may carry secrets in two places: its user info (``http://user:pass@host``) and key-like
parameters of its query or fragment (``?api-key=K``, ``#access_token=T``). ``redact_url`` hides
both in one URL; ``redact_text`` does it for every URL inside free text (errors from httpx and the
openai SDK quote the URL they failed on), and for key-like parameters of a bare path or query
(``/v1/?api-key=K``, as a server's 404 text may echo it); ``redact_value`` walks JSON-like data.
``has_credentials`` says whether a URL holds any (``llm.base_url`` may not: ``backends.py``).
``url_secrets`` lists the secret parts of one known URL, for a caller that must also hide them
where they appear out of any URL form (``OpenAiClient`` does, in the server's error texts).
Pure functions, nothing else of the package imported.

A parameter is key-like when its name, lower-cased, contains one of ``SECRET_NAME_PARTS``
(``api-key``, ``api_key``, ``key``, ``token``, ``access_token``, ``sig``, ``signature``,
``password``, ``secret``, ``auth...`` all do). Over-redaction of an innocent parameter is accepted:
these URLs are shown to people, never requested again.

``install_log_redaction()`` makes every Python log record redacted (message, arguments and
traceback), including those of httpx and the openai SDK, which log request URLs.
"""

from __future__ import annotations

import logging
import re
import traceback
from typing import Any

REDACTED = "***"
SECRET_NAME_PARTS = ("key", "token", "secret", "pass", "pwd", "auth", "sig", "credential",
                     "session", "cookie", "jwt")

# scheme://rest: the rest stops at whitespace, quotes, angle brackets and backslashes (so a URL
# inside JSON text or a repr ends where its string ends).
_URL = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>`\\]+")
# name=value pairs of a query or fragment (separators & and ;).
_PAIR = re.compile(r"(?P<name>[^&;=#?]+)=(?P<value>[^&;#]*)")
# A parameter of a query or fragment in free text, outside a full URL (same stops as _URL).
_LOOSE_PAIR = re.compile(r"(?P<lead>[?&;#])(?P<name>[A-Za-z0-9_.%-]+)="
                         r"(?P<value>[^&;#\s'\"<>`\\]*)")
_TRAILING_PUNCTUATION = ".,:;!?)]}"  # closes the sentence around a URL, kept outside it
MIN_LITERAL_SECRET = 4  # shorter parts are hidden in URL form only (else every word is hit)


def is_secret_name(name: str) -> bool:
    """True for parameter names that usually carry a credential (case-insensitive)."""
    lowered = name.lower()
    return any(part in lowered for part in SECRET_NAME_PARTS)


def has_credentials(text: str) -> bool:
    """True when ``text`` (a URL) holds what ``redact_text`` hides: user info, or a key-like
    parameter of its query or fragment."""
    return redact_text(text) != text


def redact_url(url: str) -> str:
    """``url`` with its user info and the values of key-like query/fragment parameters replaced
    by ``***``; everything else, including the text's exact spelling, kept."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    # User info: everything before the last @ ahead of the query or fragment. (A password may
    # hold an unescaped / and a path rarely holds an @: better hide too much than too little.)
    before_query = _split_first(rest, "?#")[0]
    if "@" in before_query:
        rest = f"{REDACTED}@{rest[before_query.rindex('@') + 1:]}"
    host_end = _split_first(rest, "/?#")[0]
    return f"{scheme}://{host_end}{_redact_parameters(rest[len(host_end):])}"


def _redact_parameters(tail: str) -> str:
    """The path, query and fragment with key-like parameter values hidden."""
    path, mark, after = _split_first(tail, "?#")
    if not mark:
        return tail
    if mark == "?":
        query, hash_mark, fragment = after.partition("#")
        return f"{path}?{_redact_pairs(query)}{hash_mark}{_redact_pairs(fragment)}"
    return f"{path}#{_redact_pairs(after)}"


def _split_first(text: str, marks: str) -> tuple[str, str, str]:
    positions = [text.find(m) for m in marks if m in text]
    if not positions:
        return text, "", ""
    cut = min(positions)
    return text[:cut], text[cut], text[cut + 1:]


def _redact_pairs(text: str) -> str:
    def hide(match: re.Match) -> str:
        name = match.group("name")
        if not is_secret_name(name) or _already_hidden(match):
            return match.group(0)
        return f"{name}={REDACTED}"
    return _PAIR.sub(hide, text)


def _already_hidden(match: re.Match) -> bool:
    """Redacting twice changes nothing: what follows a hidden value (``***):``) is the text's."""
    return match.group("value").startswith(REDACTED)


def redact_text(text: str) -> str:
    """``text`` with every URL in it redacted (``redact_url``), and key-like parameters of a
    query or fragment hidden wherever they stand."""
    if "://" in text:
        text = _URL.sub(_redact_url_match, text)
    if "=" not in text:
        return text

    def hide(match: re.Match) -> str:
        if not is_secret_name(match.group("name")) or _already_hidden(match):
            return match.group(0)
        return f"{match.group('lead')}{match.group('name')}={REDACTED}"
    return _LOOSE_PAIR.sub(hide, text)


def _redact_url_match(match: re.Match) -> str:
    """A URL found in prose: punctuation that ends the sentence stays outside it."""
    url = match.group(0)
    core = url.rstrip(_TRAILING_PUNCTUATION)
    return redact_url(core) + url[len(core):]


def url_secrets(url: str) -> list[str]:
    """The secret parts of ``url`` as written (user, password, values of key-like parameters),
    at least ``MIN_LITERAL_SECRET`` characters long, longest first (for literal replacement)."""
    _, sep, rest = url.partition("://")
    if not sep:
        return []
    parts: list[str] = []
    before_query = _split_first(rest, "?#")[0]
    after = rest[len(before_query):]
    if "@" in before_query:
        user_info = before_query[:before_query.rindex("@")]
        parts += [user_info, *user_info.split(":", 1)]
    parts += [m.group("value") for m in _PAIR.finditer(after) if is_secret_name(m.group("name"))]
    found = {part for part in parts if len(part) >= MIN_LITERAL_SECRET}
    return sorted(found, key=len, reverse=True)


def redact_value(value: Any) -> Any:
    """A copy of JSON-like data (dicts, lists, tuples, strings, numbers) with every string
    redacted (``redact_text``); keys stay as they are."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return {key: redact_value(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(redact_value(item) for item in value)
    return value


# --- Python logging ------------------------------------------------------------------------------

_installed = False


def install_log_redaction() -> None:
    """Redact every log record made from now on in this process (idempotent).

    Works through the record factory, so records of every logger (httpx, openai, ours) are
    redacted whatever handlers are configured later: the message is formatted with its arguments
    and redacted, and a traceback is formatted and redacted up front (``exc_text``)."""
    global _installed
    if _installed:
        return
    _installed = True
    previous = logging.getLogRecordFactory()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        _redact_record(record)
        return record

    logging.setLogRecordFactory(factory)


def _redact_record(record: logging.LogRecord) -> None:
    try:
        message = record.getMessage()
    except Exception:  # a malformed record: let logging report it as it always does
        return
    redacted = redact_text(message)
    if redacted != message or record.args:
        record.msg, record.args = redacted, ()
    if record.exc_info and record.exc_info[0] is not None and not record.exc_text:
        record.exc_text = redact_text(
            "".join(traceback.format_exception(*record.exc_info)).rstrip("\n"))
    if record.stack_info:
        record.stack_info = redact_text(record.stack_info)

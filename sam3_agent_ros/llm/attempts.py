"""How one attempt of the OpenAI client fails, and the one ``LlmError`` that ends a request.

``Retriable`` (worth another attempt) and ``Unsupported`` (a parameter to adapt) never leave the
client; ``gave_up`` turns the last retriable failure into the final ``LlmError`` with its fields
(``core/errors.py``: kind, endpoint, attempts, status code, cause) and the fix for a person
(``failure_hint``: what a final HTTP error most likely means for this configuration). A
hung endpoint (it accepts the connection and never answers) is named with the bound that expired:
``llm.timeout_s``, or the query's time (``agent.query_timeout_s``) when that was shorter.
"""

from __future__ import annotations

import random

from sam3_agent_ros.core.errors import LlmError

OFFLINE_HINT = "-p llm.backend:=offline -p segmenter.backend:=color"
LLM_TIMEOUT = "llm.timeout_s"
QUERY_TIMEOUT = "the query's deadline, agent.query_timeout_s"


class Retriable(Exception):
    """One attempt failed in a way worth retrying; ``str`` is the reason, ``retry_after`` a hint.
    ``cause`` is set when no connection could be made at all (the endpoint is unreachable);
    ``kind`` is one of ``LlmError``'s kinds."""

    def __init__(self, reason: str, retry_after: float | None = None,
                 cause: str | None = None, *, kind: str | None = None,
                 status_code: int | None = None, waited_s: float | None = None,
                 bound: str | None = None):
        super().__init__(reason + (f" ({cause})" if cause else ""))
        self.reason, self.retry_after, self.cause = reason, retry_after, cause
        self.kind = kind or (LlmError.UNREACHABLE if cause is not None else None)
        self.status_code, self.waited_s, self.bound = status_code, waited_s, bound


class Unsupported(Exception):
    """A 400 saying a request parameter is not supported by this model (adapted, then resent)."""

    def __init__(self, parameter: str, reason: str):
        super().__init__(reason)
        self.parameter = parameter


def unsupported_parameter(status: int, text: str) -> str | None:
    """``max_tokens`` or ``temperature`` when a 400 says the model does not support it."""
    lowered = text.lower()
    if status != 400 or not any(word in lowered for word in ("unsupported", "not supported",
                                                              "does not support")):
        return None
    if "max_tokens" in lowered and "max_completion_tokens" in lowered:
        return "max_tokens"
    if "temperature" in lowered:
        return "temperature"
    return None


def no_answer(endpoint: str, timeout: float, llm_timeout_s: float) -> Retriable:
    """The endpoint took the request and sent nothing back within ``timeout`` s: the attempt's
    bound, ``llm.timeout_s`` or (shorter) what was left of the query's time."""
    bound = LLM_TIMEOUT if timeout >= llm_timeout_s else QUERY_TIMEOUT
    return Retriable(f"the LLM endpoint {endpoint} did not answer within {timeout:.1f} s "
                     f"({bound})", kind=LlmError.TIMEOUT, waited_s=timeout, bound=bound)


def gave_up(last: Retriable, attempts: int, endpoint: str, why: str = "") -> LlmError:
    """The one error that ends the request (the agent prefixes "LLM request failed: ")."""
    tried = f"{attempts} attempt{'s' if attempts > 1 else ''}"

    def error(message: str) -> LlmError:
        return LlmError(message, kind=last.kind, endpoint=endpoint, attempts=attempts,
                        status_code=last.status_code, cause=last.cause, waited_s=last.waited_s)

    if last.cause is not None:
        because = f"{last.cause}; {why}" if why else last.cause
        return error(f"{last.reason} after {tried} ({because}): start the server or check "
                     f"llm.base_url; to try without a model: {OFFLINE_HINT}")
    if last.kind == LlmError.TIMEOUT:
        raise_it = "llm.timeout_s" if last.bound == LLM_TIMEOUT else "agent.query_timeout_s"
        return error(f"{last.reason} after {tried}{'; ' + why if why else ''}: it accepted "
                     f"the connection but sent no reply: check the server (its log: stuck, "
                     f"overloaded, still loading the model?) or raise {raise_it}")
    return error(f"{last} ({tried}{', ' + why if why else ''})")


def retry_delay(attempt: int, retry_after: float | None, base_s: float, max_s: float,
                jitter: float, rng: random.Random) -> float:
    """Seconds before retry ``attempt + 1`` (interface §14, ``llm.retry_jitter``).

    A server's ``Retry-After`` of t seconds (0 <= t <= ``max_s``) waits t x (1 + U[0, jitter]):
    never earlier than asked, and a fleet that got the same 429 spreads over t x jitter instead
    of coming back at one instant. Without one (or one out of range), exponential backoff with
    full jitter: U[0, min(max_s, base_s x 2^attempt)]. ``jitter`` 0: both exactly, no draw."""
    if retry_after is not None and 0 <= retry_after <= max_s:
        return retry_after * (1.0 + rng.uniform(0.0, jitter)) if jitter > 0 else retry_after
    delay = min(max_s, base_s * 2 ** attempt)
    return rng.uniform(0.0, delay) if jitter > 0 else delay


def failure_hint(status: int, text: str, *, api_key_env: str, model: str, endpoint: str) -> str:
    """The server's ``text`` of a final HTTP ``status``, with the likely fix for a person."""
    if status in (401, 403):
        # The server's text may echo part of the key: leave it out.
        return f"authentication failed; set the API key in ${api_key_env}"
    if status == 404:
        return f"{text} (check llm.model={model!r} and llm.base_url={endpoint!r})"
    lowered = text.lower()
    if status == 400 and ("image" in lowered or "multimodal" in lowered) and any(
            word in lowered for word in ("limit", "at most", "maximum", "exceed", "too many")):
        return (f"{text} (the server limits images per request; this agent sends up to 3: "
                "start vLLM with --limit-mm-per-prompt '{\"image\":3}')")
    if status == 400 and "image" in lowered:
        return f"{text} (is llm.model={model!r} a vision-language model?)"
    if status == 400 and ("max_tokens" in lowered or "context length" in lowered):
        return f"{text} (check llm.max_tokens and agent.max_image_side)"
    return text

"""The real LLM client: Chat Completions on the ``openai`` SDK, for any OpenAI-compatible endpoint.

Policy, in one place:
- Retried (``llm.max_retries`` times, our own loop so a cancel or the query deadline stops it
  between attempts): 408, 409, 429, 5xx, connection errors and timeouts. A ``Retry-After`` of t
  seconds (at most ``backoff_max_s``) waits t x (1 + U[0, ``llm.retry_jitter``]), so a fleet told
  to come back at once does not come back in lockstep; without one, exponential backoff with full
  jitter (``attempts.retry_delay``).
- Failed at once with a hint: any other 4xx (bad request, auth, unknown model); malformed 200
  responses (non-JSON body, no choices or no message, content neither a string nor a list of
  parts). An empty, cut-off or refused reply is NOT a failure here: it is returned as it came
  (content, reasoning, tool calls, finish reason, refusal) and the core decides (it is the
  model's mistake, answered with a corrective turn).
- Every failure leaves ``complete`` as ``LlmError``; nothing else escapes.
- Cancel means disconnect (interface §14): the blocking SDK call runs on a daemon thread;
  ``complete`` waits for it, the cancel token or the deadline, whichever comes first. On a cancel
  (preemption, a cancelled goal), the query's deadline, the attempt's hard bound or ``close``
  (shutdown) the call's HTTP connection is shut down at once (``llm/in_flight.py``), so a server
  that aborts on disconnect (vLLM) frees its batch slot, and ``LlmError`` is raised.
- At most ``llm.max_in_flight`` calls of this client (one per node: main loop and verifier
  together) are in flight at once; a call waits for a slot within its query's time.
- Fleet fields (interface §14): ``llm.priority`` (sent as the body's ``priority`` when not 0),
  ``llm.extra_body`` merged into every body, ``llm.extra_headers`` sent with every request; both
  checked at construction (``config/llm_requests.py``). ``request_extras`` is what the ``--trace``
  log shows of them, secrets redacted.
- Parameters a model rejects with a 400 (reasoning models: ``max_tokens`` -> ``max_completion_
  tokens``; a non-default ``temperature`` -> not sent) are adapted once, logged, and kept.
- The API key (from the environment variable named by ``llm.api_key_env``) is never logged and
  is scrubbed from every error message; so are credentials and key-like query parameters of URLs
  (``redact.py``): the endpoint is always shown redacted.
- An endpoint that cannot be reached after every attempt ends in one line naming the endpoint
  and the fix (start the server, check ``llm.base_url``, or try without a model); one that
  accepts the connection and never answers (hung) is named with the bound that expired
  (``llm.timeout_s``, or the query's time). Each ``LlmError`` carries what failed as fields
  (``core/errors.py``); the failures of one attempt and the final error are ``llm/attempts.py``.
- Images are encoded once per query: the encoder cache is keyed by the query's ``CancelToken``.
"""

from __future__ import annotations

import concurrent.futures
import json
import logging
import os
import random
import threading
import time
import weakref
from typing import Any, cast

import openai
from openai.types.chat import ChatCompletionMessageParam

from sam3_agent_ros.config import llm_requests
from sam3_agent_ros.core.cancel import CancelToken
from sam3_agent_ros.core.errors import LlmError
from sam3_agent_ros.core.types import LlmReply, Message
from sam3_agent_ros.llm import reply_fields
from sam3_agent_ros.llm.attempts import (
    Retriable,
    Unsupported,
    failure_hint,
    gave_up,
    no_answer,
    retry_delay,
    unsupported_parameter,
)
from sam3_agent_ros.llm.encoding import ImageEncoder, to_openai_messages
from sam3_agent_ros.llm.in_flight import CallSlots, InFlightCall, track_connections
from sam3_agent_ros.redact import REDACTED, is_secret_name, redact_text, redact_url, url_secrets

log = logging.getLogger(__name__)

PLACEHOLDER_API_KEY = "EMPTY"  # vLLM and most local servers accept any key
RETRIABLE_STATUS = frozenset({408, 409, 429})
_POLL_S = 0.05  # how often a waiting call looks at the cancel token
_GRACE_S = 0.5  # hard bound on one attempt beyond its timeout (httpx timeouts are per phase)
_MAX_SERVER_TEXT = 300


class OpenAiClient:
    """``LlmClient`` for an OpenAI-compatible Chat Completions endpoint (thread-safe).

    ``llm_config`` is a ``config.LlmConfig``; ``max_image_side`` is ``agent.max_image_side``.
    ``backoff_base_s``/``backoff_max_s`` shape the retry delays (base * 2**attempt, jittered).
    ``image_format`` is ``"jpeg"`` (default; quality 90) or ``"png"``; ``rng`` draws the retry
    jitter (tests seed it). A bad ``llm.extra_body`` / ``llm.extra_headers`` raises
    ``ConfigError``."""

    def __init__(self, llm_config, max_image_side: int = 1008, *, backoff_base_s: float = 0.5,
                 backoff_max_s: float = 8.0, image_format: str = "jpeg",
                 rng: random.Random | None = None):
        self._config = llm_config
        self._endpoint = redact_url(llm_config.base_url)  # how the endpoint is shown, always
        self._max_image_side = int(max_image_side)
        self._image_format = image_format
        self._backoff_base_s = float(backoff_base_s)
        self._backoff_max_s = float(backoff_max_s)
        self._api_key_env = llm_config.api_key_env
        api_key = os.environ.get(llm_config.api_key_env, "") if llm_config.api_key_env else ""
        # Only used to scrub error texts, never logged: the key, and the secret parts of the
        # endpoint URL (a server may echo its request path: "no route /v1/?api-key=K...").
        self._secrets = [s for s in (api_key, *url_secrets(llm_config.base_url)) if s]
        if not api_key:
            log.info("no API key in $%s; sending a placeholder key (fine for vLLM and other "
                     "local servers)", llm_config.api_key_env)
        self._extra_body = llm_requests.extra_body(llm_config.extra_body)
        self._extra_headers = llm_requests.extra_headers(llm_config.extra_headers)
        self._rng = rng or random.Random()
        self.slots = CallSlots(llm_config.max_in_flight)
        # The SDK's own default HTTP client (its timeouts, limits, proxies from the environment),
        # its connections tracked so that a stopped call can be cut (llm/in_flight.py).
        http_client = openai.DefaultHttpxClient()
        if not track_connections(http_client):
            log.warning("this openai SDK's HTTP stack is not one llm/in_flight.py knows: a "
                        "cancelled LLM call will not close its connection (it runs on until "
                        "llm.timeout_s on the server)")
        self._sdk = openai.OpenAI(base_url=llm_config.base_url,
                                  api_key=api_key or PLACEHOLDER_API_KEY,
                                  timeout=llm_config.timeout_s, max_retries=0,
                                  http_client=http_client)
        self._encoders: weakref.WeakKeyDictionary[CancelToken, ImageEncoder] = (
            weakref.WeakKeyDictionary())
        self._encoders_lock = threading.Lock()
        self._closed = False
        # Learned from the server's 400s (OpenAI reasoning models such as GPT-5 reject
        # max_tokens and any temperature but the default): adapted once, then kept.
        self._max_tokens_field = "max_tokens"
        self._send_temperature = True

    def __repr__(self) -> str:
        return (f"OpenAiClient(base_url={self._endpoint!r}, model={self._config.model!r}, "
                f"api_key_env={self._api_key_env!r})")

    # --- public -----------------------------------------------------------------------------------

    def encoder_for(self, cancel: CancelToken) -> ImageEncoder:
        """The image encoder (and its cache) of the query that owns ``cancel``: a child token
        (the verifier's, per examine) finds its query's encoder through its parents."""
        with self._encoders_lock:
            token: CancelToken | None = cancel
            while token is not None:
                if token in self._encoders:
                    return self._encoders[token]
                token = token.parent
            encoder = self._encoders.get(cancel)
            if encoder is None:
                encoder = ImageEncoder(self._max_image_side, self._image_format)
                self._encoders[cancel] = encoder
            return encoder

    def complete(self, messages: list[Message], cancel: CancelToken,
                 tools: list[dict] | None = None) -> LlmReply:
        if self._closed:
            raise LlmError("the LLM client is closed", endpoint=self._endpoint)
        try:
            payload = to_openai_messages(messages, self.encoder_for(cancel))
        except Exception as exc:  # noqa: BLE001 (bad image or role: input, not the endpoint)
            raise LlmError(f"cannot build the LLM request: {type(exc).__name__}: {exc}") from None
        attempts = self._config.max_retries + 1
        last: Retriable | None = None
        for attempt in range(attempts):
            if cancel.cancelled:
                raise self._cancelled()
            self._attempt_timeout(cancel)  # the deadline may already have passed
            call = self.slots.take(cancel)
            if call is None:
                raise self._cancelled() if cancel.cancelled else LlmError(
                    f"query deadline reached waiting for one of llm.max_in_flight="
                    f"{self.slots.limit} LLM call slots", kind=LlmError.DEADLINE,
                    endpoint=self._endpoint)
            try:
                return self._attempt(payload, tools, self._attempt_timeout(cancel), cancel, call)
            except Unsupported as exc:  # each parameter adapts once, so this recursion ends
                if not self._adapt(exc.parameter):
                    raise LlmError(str(exc), kind=LlmError.HTTP_STATUS, endpoint=self._endpoint,
                                   status_code=400) from None
                return self.complete(messages, cancel, tools)
            except Retriable as exc:
                last = exc
            if attempt + 1 == attempts:
                break
            delay = retry_delay(attempt, last.retry_after, self._backoff_base_s,
                                self._backoff_max_s, self._config.retry_jitter, self._rng)
            remaining = cancel.remaining()
            if remaining is not None and delay >= remaining:
                raise gave_up(last, attempt + 1, self._endpoint,
                              "no time left in the query for a retry")
            log.warning("LLM request failed (%s); retry %d/%d in %.2f s", last,
                        attempt + 1, attempts - 1, delay)
            if cancel.wait(delay):
                raise self._cancelled()
        if last is None:  # never: llm.max_retries >= 0 makes at least one attempt
            raise LlmError("no LLM request was attempted", endpoint=self._endpoint)
        raise gave_up(last, attempts, self._endpoint)

    def _cancelled(self) -> LlmError:
        return LlmError("cancelled", kind=LlmError.CANCELLED, endpoint=self._endpoint)

    def request_extras(self) -> dict[str, Any]:
        """What every request carries besides the messages, for the ``--trace`` log: the
        priority (None: not sent), the extra body fields and headers, each value of a secret-like
        name (``redact.is_secret_name``, and ``cache_salt``: a tenant's salt is what keeps other
        tenants from probing its cache) shown as ``***``."""
        return {"priority": self._config.priority or None,
                "extra_body": _redacted(self._extra_body) or None,
                "extra_headers": _redacted(self._extra_headers) or None}

    def close(self) -> None:
        """Cut every call in flight (their connections shut down at once), then close the HTTP
        connection pool; later ``complete`` calls fail with ``LlmError``."""
        self._closed = True
        self.slots.abort_all()
        try:
            self._sdk.close()
        except Exception:  # closing must never raise
            log.debug("closing the openai client failed", exc_info=True)

    # --- one attempt ------------------------------------------------------------------------------

    def _attempt_timeout(self, cancel: CancelToken) -> float:
        timeout = float(self._config.timeout_s)
        remaining = cancel.remaining()
        if remaining is not None:
            if remaining <= 0:
                raise LlmError("query deadline reached before the LLM request",
                               kind=LlmError.DEADLINE, endpoint=self._endpoint)
            timeout = min(timeout, remaining)
        return timeout

    def _attempt(self, payload: list[dict], tools: list[dict] | None, timeout: float,
                 cancel: CancelToken, call: InFlightCall) -> LlmReply:
        """One HTTP call on its own thread, holding ``call``'s slot until that thread ends."""
        future: concurrent.futures.Future = concurrent.futures.Future()

        def request() -> None:
            try:
                with call.running():
                    if future.set_running_or_notify_cancel():
                        try:
                            future.set_result(self._request(payload, tools, timeout))
                        except BaseException as exc:  # noqa: BLE001 (to the waiting thread)
                            future.set_exception(exc)
            finally:
                self.slots.give_back(call)

        try:
            threading.Thread(target=request, name="llm-request", daemon=True).start()
        except BaseException:
            self.slots.give_back(call)
            raise
        hard_deadline = time.monotonic() + timeout + _GRACE_S
        forget = cancel.on_cancel(call.abort)  # a cancel cuts the connection on its own thread
        try:
            return self._wait_for(future, call, cancel, timeout, hard_deadline)
        finally:
            forget()

    def _wait_for(self, future: concurrent.futures.Future, call: InFlightCall,
                  cancel: CancelToken, timeout: float, hard_deadline: float) -> LlmReply:
        while True:
            done, _ = concurrent.futures.wait([future], timeout=_POLL_S)
            if done:
                break
            if cancel.cancelled or self._closed:
                call.abort()  # cancel means disconnect: the server frees the slot
                raise self._cancelled()
            remaining = cancel.remaining()
            if time.monotonic() >= hard_deadline or (remaining is not None and remaining <= 0):
                call.abort()
                raise no_answer(self._endpoint, timeout, self._config.timeout_s)
        if call.aborted:  # cut by close() between two polls: its error is ours, not the server's
            raise self._cancelled()
        try:
            completion = future.result()
        except (Retriable, Unsupported, LlmError):
            raise
        except Exception as exc:  # noqa: BLE001 (every SDK failure becomes LlmError)
            raise self._classify(exc, timeout) from None
        return self._parse(completion)

    def _request(self, payload: list[dict], tools: list[dict] | None, timeout: float):
        options: dict[str, Any] = {}
        if self._config.max_tokens > 0:
            options[self._max_tokens_field] = self._config.max_tokens
        if self._send_temperature:
            options["temperature"] = self._config.temperature
        if tools:
            options["tools"] = tools
            options["tool_choice"] = "auto"
        extra_body = dict(self._extra_body)
        if self._config.priority:
            extra_body["priority"] = self._config.priority
        if extra_body:
            options["extra_body"] = extra_body
        if self._extra_headers:
            options["extra_headers"] = self._extra_headers
        # to_openai_messages builds the Chat Completions message dicts (llm/encoding.py).
        messages = cast("list[ChatCompletionMessageParam]", payload)
        return self._sdk.chat.completions.create(
            model=self._config.model, messages=messages, timeout=timeout, **options)

    def _classify(self, exc: Exception, timeout: float) -> Exception:
        """An SDK exception -> ``Retriable`` or a final ``LlmError`` with a hint."""
        base_url = self._endpoint
        if isinstance(exc, openai.APITimeoutError):
            return no_answer(base_url, timeout, self._config.timeout_s)
        if isinstance(exc, openai.APIConnectionError):
            cause = exc.__cause__ or exc.__context__
            detail = self._scrub(str(cause)) if cause and str(cause) else "no connection"
            return Retriable(f"cannot reach the LLM endpoint {base_url}", cause=detail)
        if isinstance(exc, openai.APIStatusError):
            status = exc.status_code
            text = self._server_text(exc)
            if status >= 500 or status in RETRIABLE_STATUS:
                return Retriable(f"HTTP {status}: {text}", reply_fields.retry_after(exc),
                                 kind=LlmError.HTTP_STATUS, status_code=status)
            unsupported = unsupported_parameter(status, text)
            if unsupported:
                return Unsupported(unsupported, f"HTTP {status} from {base_url}: {text}")
            hint = failure_hint(status, text, api_key_env=self._api_key_env,
                                model=self._config.model, endpoint=self._endpoint)
            return LlmError(f"HTTP {status} from {base_url}: {hint}",
                            kind=LlmError.HTTP_STATUS, endpoint=base_url, status_code=status)
        if isinstance(exc, json.JSONDecodeError):
            return LlmError(f"malformed LLM response: the body is not JSON ({exc.msg} at "
                            f"char {exc.pos})", kind=LlmError.BAD_REPLY, endpoint=base_url)
        if isinstance(exc, openai.APIResponseValidationError):
            return LlmError(f"malformed LLM response: {self._scrub(str(exc))}",
                            kind=LlmError.BAD_REPLY, endpoint=base_url)
        return LlmError(f"unexpected error from the openai client: {type(exc).__name__}: "
                        f"{self._scrub(str(exc))}")

    def _adapt(self, parameter: str) -> bool:
        """Stop sending what the server said it does not support; False if nothing changed."""
        if parameter == "max_tokens" and self._max_tokens_field == "max_tokens":
            self._max_tokens_field = "max_completion_tokens"
        elif parameter == "temperature" and self._send_temperature:
            self._send_temperature = False
        else:
            return False
        log.warning("the server rejects %r for llm.model=%r; adapting and resending", parameter,
                    self._config.model)
        return True

    def _server_text(self, exc: openai.APIStatusError) -> str:
        body = exc.body
        message = None
        if isinstance(body, dict):
            error = body.get("error", body)
            message = error.get("message") if isinstance(error, dict) else error
            message = message if message is not None else body.get("message")
        text = str(message) if message is not None else str(exc.message or "")
        text = self._scrub(text.strip())
        if len(text) > _MAX_SERVER_TEXT:
            text = text[:_MAX_SERVER_TEXT] + "..."
        return text or "(no message)"

    def _scrub(self, text: str) -> str:
        """``text`` without the API key and without credentials of any URL in it."""
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return redact_text(text)

    def _parse(self, completion) -> LlmReply:
        try:
            choices = getattr(completion, "choices", None)
            if not choices:
                raise LlmError("malformed LLM response: no choices", kind=LlmError.BAD_REPLY)
            choice = choices[0]
            message = getattr(choice, "message", None)
            if message is None:
                raise LlmError("malformed LLM response: the choice has no message",
                               kind=LlmError.BAD_REPLY)
            usage = getattr(completion, "usage", None)
            return LlmReply(
                text=reply_fields.content_text(getattr(message, "content", None)),
                prompt_tokens=reply_fields.count(usage, "prompt_tokens"),
                completion_tokens=reply_fields.count(usage, "completion_tokens"),
                reasoning=reply_fields.reasoning_text(message),
                tool_calls=reply_fields.tool_calls(getattr(message, "tool_calls", None)),
                finish_reason=reply_fields.optional_str(getattr(choice, "finish_reason", None)),
                refusal=reply_fields.optional_str(getattr(message, "refusal", None)))
        except LlmError:
            raise
        except Exception as exc:  # noqa: BLE001 (any odd shape is a malformed response)
            raise LlmError(f"malformed LLM response: {type(exc).__name__}: "
                           f"{self._scrub(str(exc))}", kind=LlmError.BAD_REPLY) from None


def _redacted(fields: dict[str, Any]) -> dict[str, Any]:
    return {name: REDACTED if is_secret_name(name) or name.lower() == "cache_salt" else value
            for name, value in fields.items()}

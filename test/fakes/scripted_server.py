"""A scripted OpenAI-compatible Chat Completions server on 127.0.0.1 for end-to-end tests.

Real HTTP, real ``openai`` client, no mocks. The server answers ``POST /v1/chat/completions`` from a
script and records every request so tests can check invariants on what the agent actually sent::

    with ScriptedServer([tool_call("segment_phrase", text_prompt="blue cube"),
                         tool_call("select_masks_and_return", final_answer_masks=[1])],
                        verifier=lambda request: verdict(True)) as server:
        config = ... llm.base_url = server.base_url ...
        ...
        assert server.unexpected_calls == 0
        for request in server.main_requests:
            assert count_images(request.body) <= 2

Main-loop requests take the next step of ``script`` (in order); verifier requests (classified by
``classify``; default: the system message asks for a ``<verdict>``) are answered by ``verifier``
when given, else also from ``script``. ``responder`` (request body -> step) replaces the script
entirely. A step is a ``Reply`` or a plain string (a reply with that text). When the script is
exhausted, or a responder fails, the server answers HTTP 500 "scripted server: no more replies"
and counts an unexpected call: tests must check ``unexpected_calls == 0`` (``assert_clean()``).

Responses are written as one ``send`` with TCP_NODELAY (two writes cost ~45 ms per call through
Nagle + delayed ACK).

Run by hand: ``python -m test.fakes.scripted_server --script steps.json`` where the file holds a
JSON list of strings or ``Reply`` field dicts (``{"status": 500}``, ``{"text": "...",
"delay_s": 2}``).
"""

from __future__ import annotations

import argparse
import base64
import collections
import dataclasses
import http.server
import itertools
import json
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from test.fakes.client_gone import GONE, STOPPED, wait_unless_gone

EXHAUSTED_MESSAGE = "scripted server: no more replies"


@dataclass(frozen=True)
class Reply:
    """One scripted answer.

    - ``text``: a normal 200 completion with that content (``None`` -> ``"content": null``);
    - ``status`` >= 400: an OpenAI-style error body ``{"error": {"message": error, ...}}``;
    - ``body``: sent verbatim as a 200 ``application/json`` body (malformed-response tests;
      a dict/list is JSON-encoded, str/bytes go as they are), overriding ``text``;
    - ``delay_s``: wait before answering (timeouts, cancel, concurrency); a client that
      disconnects meanwhile is recorded (``ScriptedServer.disconnects``) and not answered;
    - ``drop_connection``: close the socket without answering (a connection error);
    - ``usage``: include the usage block with the token counts;
    - ``message``: extra fields of the reply message, merged over ``{"role", "content"}``: any
      shape a real server sends (``reasoning_content``/``reasoning``, ``tool_calls``, ``refusal``,
      ``content`` as a list of parts); ``finish_reason`` sets the choice's."""

    text: str | None = ""
    prompt_tokens: int = 10
    completion_tokens: int = 5
    usage: bool = True
    status: int = 200
    error: str = ""
    body: Any = None
    delay_s: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)
    drop_connection: bool = False
    finish_reason: str = "stop"
    message: dict[str, Any] | None = None


Step = Reply | str


def text_reply(text: str, prompt_tokens: int = 10, completion_tokens: int = 5,
               delay_s: float = 0.0) -> Reply:
    return Reply(text=text, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                 delay_s=delay_s)


def native_call(name: str, reasoning: str | None = None, call_id: str | None = None,
                arguments: str | None = None, **parameters: Any) -> Reply:
    """A native function-calling reply (interface §1b): ``tool_calls`` with one call whose
    ``arguments`` is a JSON string (``arguments`` given: sent verbatim, e.g. invalid JSON)."""
    return native_calls([(name, arguments if arguments is not None else json.dumps(parameters))],
                        reasoning, call_id)


def native_calls(calls: list[tuple[str, str]], reasoning: str | None = None,
                 call_id: str | None = None) -> Reply:
    """Several native calls in one reply: ``calls`` is [(name, arguments JSON text), ...]."""
    prefix = call_id or f"call_{next(_call_ids)}"
    entries = [{"id": prefix if i == 0 else f"{prefix}_{i}", "type": "function",
                "function": {"name": name, "arguments": arguments}}
               for i, (name, arguments) in enumerate(calls)]
    return Reply(text=reasoning, message={"tool_calls": entries}, finish_reason="tool_calls")


def shaped(content: Any = None, finish_reason: str = "stop", **message_fields: Any) -> Reply:
    """A reply of any message shape: ``shaped(None, reasoning_content="...")``,
    ``shaped(None, refusal="no")``, ``shaped([{"type": "text", "text": "..."}])``..."""
    return Reply(text=None, message={"content": content, **message_fields},
                 finish_reason=finish_reason)


_call_ids = itertools.count(1)


def tool_call(name: str, reasoning: str = "", **parameters: Any) -> Reply:
    """A reply with one ``<tool>`` call (interface §1)."""
    call = json.dumps({"name": name, "parameters": parameters})
    return Reply(text=f"{reasoning}\n<tool>{call}</tool>".lstrip())


def verdict(accept: bool, reasoning: str = "") -> Reply:
    word = "Accept" if accept else "Reject"
    return Reply(text=f"{reasoning}\n<verdict>{word}</verdict>".lstrip())


def http_error(status: int, message: str = "", retry_after: float | None = None) -> Reply:
    headers = {"Retry-After": str(retry_after)} if retry_after is not None else {}
    return Reply(status=status, error=message or f"scripted error {status}", headers=headers)


def raw_body(body: Any) -> Reply:
    return Reply(body=body)


def slow(step: Step, delay_s: float) -> Reply:
    return dataclasses.replace(_as_reply(step), delay_s=delay_s)


def drop_connection() -> Reply:
    return Reply(drop_connection=True)


def _as_reply(step: Step) -> Reply:
    if isinstance(step, Reply):
        return step
    if isinstance(step, str):
        return Reply(text=step)
    raise TypeError(f"a scripted step must be a Reply or a str, got {type(step).__name__}")


# --- reading recorded requests ----------------------------------------------------------------


def message_parts(message: dict) -> list[dict]:
    """The content parts of a request message (a plain string becomes one text part)."""
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [p for p in content or [] if isinstance(p, dict)]


def message_text(message: dict) -> str:
    return "\n".join(p.get("text", "") for p in message_parts(message) if p.get("type") == "text")


def image_urls(body: dict) -> list[str]:
    """Every ``image_url`` URL in a request body, in order."""
    return [p["image_url"]["url"] for m in body.get("messages", []) for p in message_parts(m)
            if p.get("type") == "image_url"]


def count_images(body: dict) -> int:
    return len(image_urls(body))


def decode_image(url: str) -> np.ndarray:
    """A ``data:image/...;base64,`` URL -> RGB (H, W, 3) uint8."""
    import cv2

    header, _, data = url.partition(",")
    if not header.startswith("data:image/") or ";base64" not in header:
        raise ValueError(f"not a base64 image data URL: {url[:40]!r}")
    pixels = cv2.imdecode(np.frombuffer(base64.b64decode(data), np.uint8), cv2.IMREAD_COLOR)
    if pixels is None:
        raise ValueError("the data URL does not decode as an image")
    return cv2.cvtColor(pixels, cv2.COLOR_BGR2RGB)


def is_verifier_request(body: dict) -> bool:
    """Default classifier: the system message asks for a ``<verdict>`` (the verifier prompt)."""
    messages = body.get("messages") or []
    return bool(messages) and messages[0].get("role") == "system" and \
        "<verdict>" in message_text(messages[0])


@dataclass(frozen=True)
class RecordedRequest:
    index: int
    path: str
    kind: str  # "main" | "verifier" | "other"
    body: dict  # the parsed request JSON ({} when it was not JSON)
    headers: dict[str, str]  # lower-case names
    size_bytes: int  # length of the raw request body
    received_at: float  # time.monotonic()

    @property
    def messages(self) -> list[dict]:
        return self.body.get("messages", [])

    @property
    def n_images(self) -> int:
        return count_images(self.body)


class ScriptedServer:
    """OpenAI-compatible fake on ``127.0.0.1:<free port>``; see the module docstring."""

    def __init__(self, script: Iterable[Step] = (), *,
                 verifier: Callable[[dict], Step] | Iterable[Step] | None = None,
                 responder: Callable[[dict], Step] | None = None,
                 classify: Callable[[dict], bool] = is_verifier_request,
                 model_name: str = "scripted-model"):
        self._script = collections.deque(_as_reply(s) for s in script)
        if verifier is not None and not callable(verifier):
            verifier = collections.deque(_as_reply(s) for s in verifier)
        self._verifier = verifier
        self._responder = responder
        self._classify = classify
        self.model_name = model_name
        self.requests: list[RecordedRequest] = []
        self.unexpected_calls = 0
        self.problems: list[str] = []
        # request index -> time.monotonic() when its client went while it was being answered
        self.disconnects: dict[int, float] = {}
        self.in_flight = 0  # requests being answered now
        self.peak_in_flight = 0  # most at once so far
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._httpd: http.server.ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle ----------------------------------------------------------------------------

    def start(self) -> ScriptedServer:
        handler = type("ScriptedHandler", (_Handler,), {"owner": self})
        httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        httpd.daemon_threads = True
        httpd.block_on_close = False
        self._httpd = httpd
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="scripted-llm-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> ScriptedServer:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("the scripted server is not running")
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    # --- inspection ---------------------------------------------------------------------------

    @property
    def main_requests(self) -> list[RecordedRequest]:
        with self._lock:
            return [r for r in self.requests if r.kind == "main"]

    @property
    def verifier_requests(self) -> list[RecordedRequest]:
        with self._lock:
            return [r for r in self.requests if r.kind == "verifier"]

    @property
    def remaining_steps(self) -> int:
        with self._lock:
            return len(self._script)

    def add(self, *steps: Step) -> None:
        """Append steps to the main script (while running too)."""
        with self._lock:
            self._script.extend(_as_reply(s) for s in steps)

    def assert_clean(self, all_consumed: bool = True) -> None:
        """Fail when a call was unexpected (or, by default, when scripted steps were left)."""
        problems = list(self.problems)
        if all_consumed and self.remaining_steps:
            problems.append(f"{self.remaining_steps} scripted step(s) were never requested")
        if problems:
            raise AssertionError("scripted server: " + "; ".join(problems))

    # --- answering ----------------------------------------------------------------------------

    def _record(self, path: str, headers: dict[str, str], raw: bytes) -> RecordedRequest:
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            body = {}
        if not isinstance(body, dict):
            body = {}
        kind = "other"
        if path.rstrip("/").endswith("/chat/completions"):
            try:
                kind = "verifier" if self._classify(body) else "main"
            except Exception as exc:  # noqa: BLE001 (a test's classifier bug is reported)
                self._problem(f"classify failed: {type(exc).__name__}: {exc}")
                kind = "main"
        with self._lock:
            request = RecordedRequest(len(self.requests), path, kind, body, headers, len(raw),
                                      time.monotonic())
            self.requests.append(request)
        return request

    def _problem(self, text: str) -> None:
        with self._lock:
            self.unexpected_calls += 1
            self.problems.append(text)

    def _next_step(self, request: RecordedRequest) -> Reply | None:
        source: Any = self._responder
        if request.kind == "verifier" and self._verifier is not None:
            source = self._verifier
        if callable(source):
            try:
                step = source(request.body)
            except Exception as exc:  # noqa: BLE001 (reported as an unexpected call)
                self._problem(f"request {request.index}: responder raised "
                              f"{type(exc).__name__}: {exc}")
                return None
            if step is None:
                self._problem(f"request {request.index}: responder returned None")
                return None
            return _as_reply(step)
        queue = source if source is not None else self._script
        with self._lock:
            if queue:
                return queue.popleft()
        self._problem(f"request {request.index} ({request.kind}): no more replies")
        return None

    def _respond(self, request: RecordedRequest, connection: socket.socket | None = None
                 ) -> tuple[int, dict[str, str], bytes] | None:
        """(status, headers, body) for a request, or None to drop the connection."""
        if request.kind == "other":
            if request.path.rstrip("/").endswith("/models"):
                return 200, {}, _json({"object": "list", "data": [
                    {"id": self.model_name, "object": "model", "owned_by": "scripted"}]})
            self._problem(f"request {request.index}: unexpected path {request.path}")
            return 404, {}, _error_body(404, f"scripted server: no route {request.path}")
        if not request.body:
            self._problem(f"request {request.index}: the body is not a JSON object")
            return 400, {}, _error_body(400, "scripted server: the body is not a JSON object")
        reply = self._next_step(request)
        if reply is None:
            return 500, {}, _error_body(500, EXHAUSTED_MESSAGE)
        if reply.delay_s > 0:
            waited = (wait_unless_gone(connection, reply.delay_s, self._stop)
                      if connection is not None else
                      STOPPED if self._stop.wait(reply.delay_s) else "done")
            if waited == GONE:
                with self._lock:
                    self.disconnects[request.index] = time.monotonic()
            if waited in (GONE, STOPPED):
                return None
        if reply.drop_connection:
            return None
        if reply.body is not None:
            body = reply.body
            if isinstance(body, (dict, list)):
                body = _json(body)
            elif isinstance(body, str):
                body = body.encode("utf-8")
            return 200, dict(reply.headers), body
        if reply.status >= 400:
            return reply.status, dict(reply.headers), _error_body(reply.status, reply.error)
        completion: dict[str, Any] = {
            "id": f"chatcmpl-scripted-{request.index}", "object": "chat.completion",
            "created": int(time.time()), "model": request.body.get("model", self.model_name),
            "choices": [{"index": 0, "finish_reason": reply.finish_reason,
                         "message": {"role": "assistant", "content": reply.text,
                                     **(reply.message or {})}}]}
        if reply.usage:
            completion["usage"] = {"prompt_tokens": reply.prompt_tokens,
                                   "completion_tokens": reply.completion_tokens,
                                   "total_tokens": reply.prompt_tokens + reply.completion_tokens}
        return reply.status, dict(reply.headers), _json(completion)


def _json(value: Any) -> bytes:
    return json.dumps(value).encode("utf-8")


def _error_body(status: int, message: str) -> bytes:
    kinds = {400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error",
             429: "rate_limit_error"}
    return _json({"error": {"message": message, "type": kinds.get(status, "server_error"),
                            "code": status}})


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    owner: ScriptedServer  # set on the per-server subclass

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._serve(b"")

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self._serve(self.rfile.read(length) if length > 0 else b"")

    def _serve(self, raw: bytes) -> None:
        headers = {k.lower(): v for k, v in self.headers.items()}
        request = self.owner._record(self.path, headers, raw)
        with self.owner._lock:
            self.owner.in_flight += 1
            self.owner.peak_in_flight = max(self.owner.peak_in_flight, self.owner.in_flight)
        try:
            answer = self.owner._respond(request, self.connection)
        finally:
            with self.owner._lock:
                self.owner.in_flight -= 1
        if answer is None:
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return
        status, extra_headers, body = answer
        reason = http.HTTPStatus(status).phrase if status in http.HTTPStatus._value2member_map_ \
            else "Scripted"
        lines = [f"HTTP/1.1 {status} {reason}", "Content-Type: application/json",
                 f"Content-Length: {len(body)}", "Connection: keep-alive"]
        lines += [f"{name}: {value}" for name, value in extra_headers.items()]
        try:  # headers and body in ONE write (see the module docstring)
            self.wfile.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
        except OSError:
            self.close_connection = True


class SilentServer:
    """A hung endpoint on ``127.0.0.1:<free port>``: it accepts every connection (the kernel's
    backlog completes the handshake, a thread takes them off it) and never reads or answers, like
    an LLM server stuck in a load or a deadlock. ``connections`` counts the accepted ones.
    ``stop`` closes them all."""

    def __init__(self) -> None:
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self._listener.settimeout(0.05)
        self.port: int = self._listener.getsockname()[1]
        self._held: list[socket.socket] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, name="silent-llm-server",
                                        daemon=True)

    def start(self) -> SilentServer:
        self._thread.start()
        return self

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                connection, _ = self._listener.accept()
            except OSError:  # the 50 ms poll (TimeoutError), or closed by stop
                continue
            with self._lock:
                self._held.append(connection)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2.0)
        with self._lock:
            held, self._held = self._held, []
        for connection in held:
            connection.close()
        self._listener.close()

    def __enter__(self) -> SilentServer:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()

    @property
    def connections(self) -> int:
        with self._lock:
            return len(self._held)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"


def _main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Scripted OpenAI-compatible server (tests).")
    parser.add_argument("--script", required=True,
                        help="JSON file: a list of strings or Reply field dicts")
    parser.add_argument("--url-file", help="write the base URL into this file once serving "
                                           "(a script can wait for it: the port is free, not "
                                           "fixed)")
    args = parser.parse_args(argv)
    with open(args.script, encoding="utf-8") as handle:
        steps = [s if isinstance(s, str) else Reply(**s) for s in json.load(handle)]
    with ScriptedServer(steps) as server:
        print(f"serving {len(steps)} scripted replies at {server.base_url} (Ctrl-C stops)",
              flush=True)
        if args.url_file:  # written whole, then renamed: a reader never sees half a URL
            partial = f"{args.url_file}.partial"
            with open(partial, "w", encoding="utf-8") as handle:
                handle.write(server.base_url + "\n")
            os.replace(partial, args.url_file)
        try:
            while True:
                time.sleep(1.0)
        except KeyboardInterrupt:
            pass
    print(f"{len(server.requests)} requests, {server.unexpected_calls} unexpected", flush=True)


if __name__ == "__main__":
    _main()

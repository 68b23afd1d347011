"""The node's model calls in flight: at most ``llm.max_in_flight`` at once, and each one's HTTP
connection closed at once when its query stops (interface §14).

Cancel means disconnect. vLLM aborts a request when its client disconnects, which frees the
batch slot; a call left to run until ``llm.timeout_s`` would keep generating for nobody (a
runaway reply of ``llm.max_tokens`` 8192 holds a slot for about a minute). So every call runs
with an ``InFlightCall`` that knows the connection it uses, and ``abort()`` shuts that socket
down (``shutdown(SHUT_RDWR)``: a ``close()`` from another thread would neither wake the thread
blocked reading it nor send the FIN while that read holds the file).

How the connection is known: ``track_connections`` wraps the network backend of the SDK's HTTP
connection pools (httpcore's ``network_backend``: ``connect_tcp`` -> a stream). Each stream, when
read or written, registers itself with the call running on that thread (a thread-local set by
``InFlightCall.running``), so a kept-alive connection reused by a later call is attributed to
that call; a call that finished forgets it. An abort that comes before the call touched its
connection (still waiting for a slot, connecting) marks the call: its first read or write shuts
the connection down instead.

``CallSlots`` is the cap: a slot is taken before an attempt starts and given back when its HTTP
call has really ended (the request thread's end, not the waiter's), so the cap bounds what the
server sees; waiting for a slot stops on cancel and at the query's deadline.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sam3_agent_ros.core.cancel import CancelToken

log = logging.getLogger(__name__)
_POLL_S = 0.05  # how often a call waiting for a slot looks at its cancel token
_running = threading.local()  # .call: the InFlightCall of the request running on this thread


class InFlightCall:
    """One attempt's HTTP call: the connection(s) it used, and ``abort`` to cut them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._streams: list[Any] = []
        self.aborted = False
        self.finished = False

    @contextmanager
    def running(self) -> Iterator[None]:
        """Around the blocking SDK call, on the thread that makes it."""
        _running.call = self
        try:
            yield
        finally:
            _running.call = None
            with self._lock:
                self.finished = True
                self._streams = []

    def attach(self, stream: Any) -> None:
        with self._lock:
            if self.finished or any(s is stream for s in self._streams):
                return
            self._streams.append(stream)
            aborted = self.aborted
        if aborted:
            _shut(stream)

    def abort(self) -> None:
        """Shut the call's connection down now (the server sees the client go)."""
        with self._lock:
            if self.finished or self.aborted:
                return
            self.aborted = True
            streams = list(self._streams)
        for stream in streams:
            _shut(stream)


def _shut(stream: Any) -> None:
    sock = stream.get_extra_info("socket")
    if sock is None:
        stream.close()
        return
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:  # already closed or reset: nothing left to cut
        pass


class CallSlots:
    """At most ``limit`` calls in flight at once (thread-safe); ``abort_all`` cuts them all."""

    def __init__(self, limit: int):
        if limit < 1:
            raise ValueError(f"the in-flight limit must be at least 1, got {limit}")
        self.limit = limit
        self._free = threading.Semaphore(limit)
        self._lock = threading.Lock()
        self._calls: list[InFlightCall] = []
        self.peak = 0  # most calls in flight at once so far (diagnostics, tests)

    @property
    def in_flight(self) -> int:
        with self._lock:
            return len(self._calls)

    def take(self, cancel: CancelToken) -> InFlightCall | None:
        """A slot for one call, or None when the query was cancelled or its deadline came
        while waiting (the caller says which)."""
        while not self._free.acquire(timeout=_POLL_S):
            remaining = cancel.remaining()
            if cancel.cancelled or (remaining is not None and remaining <= 0):
                return None
        if cancel.cancelled:
            self._free.release()
            return None
        call = InFlightCall()
        with self._lock:
            self._calls.append(call)
            self.peak = max(self.peak, len(self._calls))
        return call

    def give_back(self, call: InFlightCall) -> None:
        with self._lock:
            if call not in self._calls:
                return
            self._calls.remove(call)
        self._free.release()

    def abort_all(self) -> None:
        with self._lock:
            calls = list(self._calls)
        for call in calls:
            call.abort()


class _TrackedStream:
    """A network stream that tells the call on the current thread that it uses it."""

    def __init__(self, inner: Any):
        self._inner = inner

    def _mark(self) -> None:
        call = getattr(_running, "call", None)
        if call is not None:
            call.attach(self)

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        self._mark()
        return self._inner.read(max_bytes, timeout)

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._mark()
        self._inner.write(buffer, timeout)

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context, server_hostname=None, timeout=None) -> _TrackedStream:
        return _TrackedStream(self._inner.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _TrackingBackend:
    """httpcore's network backend, its streams tracked (``_TrackedStream``)."""

    def __init__(self, inner: Any):
        self._inner = inner

    def connect_tcp(self, *args: Any, **kwargs: Any) -> _TrackedStream:
        stream = _TrackedStream(self._inner.connect_tcp(*args, **kwargs))
        stream._mark()  # an abort during the connect cuts the connection as soon as it exists
        return stream

    def connect_unix_socket(self, *args: Any, **kwargs: Any) -> _TrackedStream:
        stream = _TrackedStream(self._inner.connect_unix_socket(*args, **kwargs))
        stream._mark()
        return stream

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def track_connections(http_client: Any) -> int:
    """Wrap the network backend of every connection pool of ``http_client`` (the openai SDK's
    httpx client: its transport and its proxy mounts); the number of pools wrapped. 0 means
    this SDK's HTTP stack is not the one this was built on: cancels then cannot disconnect
    (the caller warns)."""
    transports = [getattr(http_client, "_transport", None),
                  *(getattr(http_client, "_mounts", None) or {}).values()]
    wrapped = 0
    for transport in transports:
        pool = getattr(transport, "_pool", None)
        backend = getattr(pool, "_network_backend", None)
        if backend is None or not hasattr(backend, "connect_tcp"):
            continue
        if not isinstance(backend, _TrackingBackend):
            pool._network_backend = _TrackingBackend(backend)  # type: ignore[union-attr]
        wrapped += 1
    return wrapped


def wait_until_ended(call: InFlightCall, timeout_s: float) -> bool:
    """Tests and shutdown: True once ``call`` finished within ``timeout_s``."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if call.finished:
            return True
        time.sleep(0.01)
    return call.finished

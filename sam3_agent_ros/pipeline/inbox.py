"""The query topic's inbox: the executor only drops each message here; one intake thread reads
them in arrival order. ROS-free (the node passes plain callables).

A burst of topic queries arrives faster than the executor thread could parse, log and submit
each one and publish the results of those that never run (a preempted or refused query's
``cancelled`` / ``failed`` result): meanwhile the middleware's reader history overflowed and
the rest of the burst was lost without a word (issue 34: 1000 queries, 348 results). So the
query callback does the least possible (``QueryInbox.put``: append, wake the intake thread) and
the intake thread does the rest (``handle``). Every message put is answered exactly once:

- by ``handle`` on the intake thread (parsed; its query submitted, or its one ``failed`` result);
- at once by ``refuse`` when the inbox is full (``max_messages`` waiting, or ``max_bytes`` of
  text): "queue full ..." in the callback itself, which then takes as long as publishing a
  result and so slows the executor down to what the node can answer (the middleware holds the
  rest, reliable delivery);
- by ``refuse`` with the reason of ``drain`` / ``stop`` for those still waiting when the node
  deactivates or shuts down.
"""

from __future__ import annotations

import collections
import logging
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)

INBOX_MESSAGES = 4096  # messages waiting for the intake thread (a burst of 1000 fits)
INBOX_BYTES = 16 * 2**20  # their text together (a query is at most max_query_chars)


def inbox_full_reason(max_messages: int) -> str:
    """The error of a query refused because the inbox was full."""
    return (f"queue full (intake: {max_messages} query messages already waiting to be read): "
            "queries arrive faster than the node can take them; send it again later")


class QueryInbox:
    """``put`` (the executor's query callback) and one intake thread calling ``handle(raw)`` for
    each message in order. ``refuse(raw, reason)`` answers a message that will not be handled
    (inbox full, drained, stopped). ``handle`` and ``refuse`` must not raise (logged if so)."""

    def __init__(self, handle: Callable[[str], None], refuse: Callable[[str, str], None],
                 max_messages: int = INBOX_MESSAGES, max_bytes: int = INBOX_BYTES):
        self._handle, self._refuse = handle, refuse
        self.max_messages, self.max_bytes = max_messages, max_bytes
        self._changed = threading.Condition()
        self._waiting: collections.deque[str] = collections.deque()
        self._bytes = 0
        self._busy = False  # the intake thread is handling a message
        self._stopping: str | None = None  # stop's reason, once stopped
        self.refused_full = 0  # messages refused because the inbox was full (diagnostics)
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._work, name="sam3_agent_intake", daemon=True)
        self._thread.start()

    def put(self, raw: str) -> bool:
        """Queue one message for the intake thread; False when it was refused at once (full, or
        stopped: then answered here)."""
        with self._changed:
            stopping = self._stopping
            full = (len(self._waiting) >= self.max_messages
                    or (self._waiting and self._bytes + len(raw) > self.max_bytes))
            if not stopping and not full:
                self._waiting.append(raw)
                self._bytes += len(raw)
                self._changed.notify_all()
                return True
            if full and not stopping:
                self.refused_full += 1
        self._refuse_safely(raw, stopping or inbox_full_reason(self.max_messages))
        return False

    @property
    def backlog(self) -> int:
        """Messages waiting for the intake thread."""
        with self._changed:
            return len(self._waiting)

    def wait_empty(self, timeout_s: float) -> bool:
        """Wait until every message put so far was handled; False on timeout."""
        with self._changed:
            return self._changed.wait_for(lambda: not self._waiting and not self._busy,
                                          timeout_s)

    def drain(self, reason: str) -> int:
        """Refuse every waiting message with ``reason`` (deactivate); how many."""
        with self._changed:
            waiting = list(self._waiting)
            self._waiting.clear()
            self._bytes = 0
        for raw in waiting:
            self._refuse_safely(raw, reason)
        return len(waiting)

    def stop(self, reason: str, timeout_s: float) -> bool:
        """End the intake thread (the message it handles finishes) and refuse what still waits
        with ``reason``; later ``put`` calls are refused alike. False if the thread is still
        busy after ``timeout_s``."""
        with self._changed:
            self._stopping = reason
            self._changed.notify_all()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout_s)
        self.drain(reason)
        return thread is None or not thread.is_alive()

    def _work(self) -> None:
        while True:
            with self._changed:
                while not self._waiting and not self._stopping:
                    self._changed.wait()
                if self._stopping:
                    return
                raw = self._waiting.popleft()
                self._bytes -= len(raw)
                self._busy = True
            try:
                self._handle(raw)
            except Exception:  # the intake must survive anything
                log.exception("the query intake failed on a message")
            finally:
                with self._changed:
                    self._busy = False
                    self._changed.notify_all()

    def _refuse_safely(self, raw: str, reason: str) -> None:
        try:
            self._refuse(raw, reason)
        except Exception:
            log.exception("refusing a query message failed")

"""How a test server sees its client go: a socket that turns readable with nothing to read (the
client's FIN) or reset, while the server is still working on the request (interface §14: a
stopped call closes its connection, so a server that aborts on disconnect frees the slot).

``wait_unless_gone(connection, seconds, stop)`` is the scripted server's "work" (a reply's
``delay_s``): it returns early, with ``GONE``, as soon as the client has disconnected; with
``STOPPED`` when the server stops; ``DONE`` after ``seconds``. A keep-alive client sends nothing
while it waits for its answer, so any readable byte before the answer is unexpected, and reads
as the client still being there (a pipelined request is not something these tests send).
"""

from __future__ import annotations

import select
import socket
import threading
import time

DONE, GONE, STOPPED = "done", "gone", "stopped"
_POLL_S = 0.01  # 10 ms: a disconnect is seen within this (the tests bound it at 1 s)


def client_gone(connection: socket.socket) -> bool:
    """True when the peer has closed or reset ``connection`` (non-blocking look)."""
    try:
        readable, _, _ = select.select([connection], [], [], 0)
        if not readable:
            return False
        return connection.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except (OSError, ValueError):  # reset, or the socket is already closed
        return True


def wait_unless_gone(connection: socket.socket, seconds: float, stop: threading.Event) -> str:
    end = time.monotonic() + seconds
    while True:
        if client_gone(connection):
            return GONE
        left = end - time.monotonic()
        if left <= 0:
            return DONE
        if stop.wait(min(_POLL_S, left)):
            return STOPPED

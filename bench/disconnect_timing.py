"""Cancel means disconnect (interface §14), timed: for each way a query stops its call in flight
(a cancel or a preemption, the query's deadline, llm.timeout_s, close at shutdown), the time from
the stop to the scripted server seeing its client's connection close (``ScriptedServer.
disconnects``: the FIN while it is still "generating"). Part of bench/fleet.py's output.

    python bench/disconnect_timing.py [--trials 10]
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time

from common import command_line, write_result  # noqa: F401  (puts ROOT on sys.path)

from sam3_agent_ros.config import LlmConfig  # noqa: E402
from sam3_agent_ros.core.cancel import CancelToken  # noqa: E402
from sam3_agent_ros.core.errors import LlmError  # noqa: E402
from sam3_agent_ros.core.types import Message  # noqa: E402
from sam3_agent_ros.llm.openai_client import OpenAiClient  # noqa: E402
from test.fakes.scripted_server import ScriptedServer, slow  # noqa: E402

KEY_ENV = "SAM3_AGENT_FLEET_BENCH_KEY"
BOUND_S = 0.4  # the deadline / llm.timeout_s of the timed trials


def one_trial(path: str) -> float | None:
    """Seconds from the stop to the server seeing the client go (None: it never did)."""
    messages = [Message.text("system", "planner"), Message.text("user", "the cup")]
    with ScriptedServer(responder=lambda body: slow("late", 30.0)) as server:
        config = LlmConfig(base_url=server.base_url, api_key_env=KEY_ENV, max_retries=0,
                           timeout_s=BOUND_S if path == "llm.timeout_s" else 60.0)
        client = OpenAiClient(config)
        cancel = CancelToken(deadline=time.monotonic() + BOUND_S
                             if path == "query deadline" else None)
        started = time.monotonic()

        def call() -> None:
            try:
                client.complete(messages, cancel)
            except LlmError:
                pass

        thread = threading.Thread(target=call, daemon=True)
        thread.start()
        while server.in_flight == 0 and time.monotonic() - started < 5:
            time.sleep(0.002)
        if path in ("cancel", "preempt"):
            time.sleep(0.1)
            stopped = time.monotonic()
            cancel.cancel("preempted by a newer query" if path == "preempt" else "cancelled")
        elif path == "close (shutdown)":
            time.sleep(0.1)
            stopped = time.monotonic()
            client.close()
        else:
            stopped = started + BOUND_S
        end = time.monotonic() + 3.0
        while not server.disconnects and time.monotonic() < end:
            time.sleep(0.002)
        thread.join(3.0)
        return (next(iter(server.disconnects.values())) - stopped) if server.disconnects \
            else None


def measure(trials: int) -> dict[str, dict]:
    os.environ.setdefault(KEY_ENV, "EMPTY")
    results = {}
    for path in ("cancel", "preempt", "query deadline", "llm.timeout_s", "close (shutdown)"):
        times = [one_trial(path) for _ in range(trials)]
        seen = sorted(t for t in times if t is not None)
        results[path] = {"trials": trials, "seen": len(seen),
                         "p50_ms": round(seen[len(seen) // 2] * 1e3, 1) if seen else None,
                         "max_ms": round(seen[-1] * 1e3, 1) if seen else None}
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--trials", type=int, default=10)
    args = parser.parse_args(argv)
    for path, r in measure(args.trials).items():
        print(f"{path:18s} server saw the client go in {r['seen']}/{r['trials']} trials: "
              f"p50 {r['p50_ms']} ms, max {r['max_ms']} ms after the stop")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""bench/vllm_emulator.py, the engine model bench/fleet.py runs against: its prefix cache and its
priority queue do what vLLM's do (a test of the emulator, so that its figures mean something)."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from vllm_emulator import Engine, EngineParams, block_hashes, request_segments  # noqa: E402

SYSTEM = {"role": "system", "content": "You plan tool calls. " * 40}


def body(text: str, priority: int = 0, salt: str | None = None) -> dict:
    request = {"messages": [SYSTEM, {"role": "user", "content": text}]}
    if priority:
        request["priority"] = priority
    if salt:
        request["cache_salt"] = salt
    return request


def test_a_shared_prefix_gives_the_same_leading_blocks_unless_the_salt_differs():
    params = EngineParams()
    a, _ = block_hashes(request_segments(body("first question " * 20), params), 16, None)
    b, _ = block_hashes(request_segments(body("another one " * 20), params), 16, None)
    shared = next(i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y)
    assert shared >= 12  # the system prompt's ~210 tokens: 13 full blocks
    salted, _ = block_hashes(request_segments(body("first question " * 20), params), 16, "t")
    assert salted[0] != a[0]


@pytest.mark.parametrize("prefix_cache", [True, False])
def test_the_second_call_of_a_prefix_is_served_from_the_cache(prefix_cache):
    engine = Engine(EngineParams(speed=200.0, prefix_cache=prefix_cache))
    try:
        first = engine.submit(body("question " * 10), "main", 5)
        second = engine.submit(body("question " * 10 + "and more"), "main", 5)
    finally:
        engine.stop()
    assert first.cached_tokens == 0
    assert (second.cached_tokens > 200) is prefix_cache


def until(condition, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.005)


@pytest.mark.parametrize("priority", [True, False])
def test_the_waiting_queue_serves_lower_priority_values_first(priority):
    engine = Engine(EngineParams(speed=20.0, max_num_seqs=1, priority=priority))
    names: dict[int, str] = {}  # request id -> name

    def ask(name: str, value: int, tokens: int) -> None:
        request = engine.submit(body(f"{name} " * 30, value), "main", tokens)
        names[request.id] = name

    try:
        # ~14 s of engine time, 0.7 s of wall time: the next two wait for its slot
        running = threading.Thread(target=ask, args=("running", 5, 2000))
        running.start()
        until(lambda: engine._running)  # admitted (a loaded host may take more than 50 ms)
        late = [threading.Thread(target=ask, args=(name, value, 5))
                for name, value in (("background", 10), ("operator", 0))]
        for waiting, thread in enumerate(late, start=1):
            thread.start()
            until(lambda n=waiting: len(engine._waiting) >= n)  # arrived in this order
        for thread in [running, *late]:
            thread.join(10.0)
    finally:
        engine.stop()
    # The order the engine finished them in (the threads' own wake-ups may come in any order)
    order = [names.get(request.id) for request in engine.finished]
    expected = ["running", "operator", "background"] if priority else \
        ["running", "background", "operator"]
    assert order == expected

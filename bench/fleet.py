"""A fleet of robots on one model server, EMULATED (interface §14): N robots, each the real agent
core (``Agent``) and the real LLM client (``OpenAiClient``: HTTP, the in-flight cap, the fleet
fields) on its own frame, no ROS, against bench/vllm_emulator.py (one vLLM server modelled: batch
limit, prefill/decode time per token, prefix cache, priority queue; its defaults and their
sources in docs/fleet.md). Nothing here runs a model: the figures are what the engine model
predicts for this agent's requests, to be recalibrated on a GPU (docs/fleet.md).

Robots: one in ``--operator-every`` is an operator's robot (interactive queries, llm.priority 0:
no field sent), the others run background queries (llm.priority ``--background-priority``); each
asks a query, waits an exponential think time (mean ``--operator-interval-s`` /
``--background-interval-s``), asks again. A query is the agent's shortest road: segment_phrase
(2 masks), examine_each_mask (2 verifier calls, 3 images each), select: 5 calls.

Time is scaled (``--speed`` engine seconds per wall second, default 8): the engine runs in
virtual time, and every figure is engine time. A query's latency is the time some call of it was
in the engine (queue, prefill, decode: the union of its calls' intervals); the robot's own time
between its calls is left out (here up to 100 robots share 2 cores; on a fleet each has its own
computer, and its time alone is ~0.01-0.05 s a query, printed as robot-side time), and so are
the HTTP round trips (add the network's). The robots send 336 px images (cheap JPEG on 2 cores)
and the emulator counts each as a 1008 px frame's tokens (``image_tokens_side``); the load is
what the robots managed to offer (printed as queries/s). Queries that start in the measured
window are followed to their end (``--drain-s``) while the fleet goes on asking.

Printed per N (1, 10, 50, 100) and per class: query latency p50/p95, the calls' time to first
token p50/p99, the prefix-cache hit share, then the robots one server holds under the latency
target (operator p95 <= ``--target-s``). Priority and prefix caching on and off are compared at
the largest N. Also the byte prefix share of the requests (how much of a call starts like the
one before: within a query, across rounds; across robots on the same frame shape).

    python bench/fleet.py                # ~1.5 min on 2 cores
    python bench/fleet.py --fleet 1 10 --duration-s 60
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import threading
import time
from dataclasses import dataclass, replace

import disconnect_timing
import numpy as np
from common import command_line, write_result
from vllm_emulator import EngineParams, VllmEmulator

from sam3_agent_ros.config import Config  # noqa: E402  (after common puts ROOT on sys.path)
from sam3_agent_ros.core.agent import Agent  # noqa: E402
from sam3_agent_ros.core.cancel import CancelToken  # noqa: E402
from sam3_agent_ros.core.types import Frame, Query, QueryStatus  # noqa: E402
from sam3_agent_ros.llm.openai_client import OpenAiClient  # noqa: E402
from test.fakes.segmenters import BoxSegmenter  # noqa: E402

WIDTH, HEIGHT = 1280, 720
SENT_SIDE, COUNTED_SIDE = 336, 1008
BOXES = {"object": [(200, 200, 420, 380, 0.9), (700, 300, 900, 520, 0.8)]}
KEY_ENV = "SAM3_AGENT_FLEET_BENCH_KEY"


@dataclass(frozen=True)
class Scenario:
    robots: int
    priority: bool = True
    prefix_cache: bool = True

    @property
    def name(self) -> str:
        return (f"N={self.robots} priority {'on' if self.priority else 'off'}, prefix cache "
                f"{'on' if self.prefix_cache else 'off'}")


class TimedLlm:
    """The robot's LLM client, measuring the wall time some call of the query was in flight
    (the verifier's concurrent calls count once)."""

    def __init__(self, inner: OpenAiClient):
        self.inner = inner
        self._lock = threading.Lock()
        self._active = 0
        self._since = 0.0
        self.waited = 0.0

    def complete(self, messages, cancel, tools=None):
        with self._lock:
            if self._active == 0:
                self._since = time.monotonic()
            self._active += 1
        try:
            return self.inner.complete(messages, cancel)
        finally:
            with self._lock:
                self._active -= 1
                if self._active == 0:
                    self.waited += time.monotonic() - self._since

    def close(self):
        self.inner.close()


class Robot(threading.Thread):
    def __init__(self, number: int, operator: bool, base_url: str, args, speed: float,
                 stop: threading.Event, clock, last_start_v: float):
        super().__init__(name=f"robot-{number}", daemon=True)
        self.number, self.operator, self.speed, self.stop, self.clock = (
            number, operator, speed, stop, clock)
        self.interval_s = args.operator_interval_s if operator else args.background_interval_s
        params = {"llm.base_url": base_url, "llm.api_key_env": KEY_ENV,
                  "llm.timeout_s": 600.0, "agent.query_timeout_s": 3600.0,
                  "agent.max_image_side": SENT_SIDE,
                  "llm.extra_headers": f'{{"X-Robot": "robot-{number}"}}',
                  "llm.extra_body": f'{{"user": "robot-{number}"}}'}
        if not operator and args.background_priority:
            params["llm.priority"] = args.background_priority
        config = Config.from_params(params)
        self.llm = TimedLlm(OpenAiClient(config.llm, SENT_SIDE))
        self.agent = Agent(config, llm=self.llm, segmenter=BoxSegmenter(BOXES))
        self.pixels = np.random.default_rng(number)
        self.rng = random.Random(number)
        self.last_start_v = last_start_v  # no query starts after this
        self.current_start_v: float | None = None  # the running query's start
        # (start_v, end_v, client-side wall s outside the LLM calls, status)
        self.queries: list[tuple[float, float, float, str]] = []
        self.cancel = CancelToken()

    def run(self) -> None:
        # a random phase so that the fleet does not start in lockstep
        if self.stop.wait(self.rng.uniform(0, self.interval_s) / self.speed):
            return
        while not self.stop.is_set() and self.clock() < self.last_start_v:
            start_v, started = self.clock(), time.monotonic()
            self.current_start_v = start_v
            self.llm.waited = 0.0
            token = self.cancel.child()
            # a new camera frame for every query (the frame is never the last query's)
            frame = Frame(self.pixels.integers(0, 255, (HEIGHT, WIDTH, 3), dtype=np.uint8),
                          len(self.queries), 0, "camera")
            result = self.agent.run(frame, Query(f"q{len(self.queries)}", "the object"),
                                    cancel=token)
            self.cancel.release(token)
            client_s = max(0.0, time.monotonic() - started - self.llm.waited)
            self.queries.append((start_v, self.clock(), client_s, result.status.value))
            self.current_start_v = None
            if result.status is not QueryStatus.SUCCEEDED and not self.stop.is_set():
                print(f"  robot {self.number}: {result.status.value}: {result.error}",
                      file=sys.stderr)
            if self.stop.wait(self.rng.expovariate(1.0 / self.interval_s) / self.speed):
                return


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    return float(np.percentile(values, q))


def run_scenario(scenario: Scenario, args) -> dict:
    params = EngineParams(prefix_cache=scenario.prefix_cache, priority=scenario.priority,
                          speed=args.speed, image_tokens_side=COUNTED_SIDE,
                          max_num_seqs=args.max_num_seqs)
    with VllmEmulator(params) as emulator:
        stop = threading.Event()
        end_v = args.warmup_s + args.duration_s
        robots = [Robot(i, i % args.operator_every == 0, emulator.base_url, args, args.speed,
                        stop, emulator.engine.now, end_v + args.drain_s)
                  for i in range(scenario.robots)]
        for robot in robots:
            robot.start()

        def measured_running() -> bool:
            return any(r.current_start_v is not None and r.current_start_v <= end_v
                       for r in robots)

        # the queries that started in the window finish (at most --drain-s more) under the same
        # load: the robots go on asking, those later queries are not measured
        while emulator.engine.now() < end_v or (
                measured_running() and emulator.engine.now() < end_v + args.drain_s):
            time.sleep(0.05)
        unfinished = sum(1 for r in robots if r.current_start_v is not None
                         and r.current_start_v <= end_v)
        drained_v = emulator.engine.now()
        stop.set()
        for robot in robots:
            robot.cancel.cancel("benchmark over")
        for robot in robots:
            robot.join(5.0)
            robot.llm.close()
        finished = list(emulator.engine.finished)
        bodies = [(r.headers.get("x-robot", ""), r.kind, r.body) for r in
                  emulator.server.requests[:400]]
    by_user: dict[str, list] = {}
    for request in finished:
        by_user.setdefault(request.user, []).append(request)
    classes = {}
    for name, operator in (("operator", True), ("background", False)):
        latencies = [query_latency(q, by_user.get(f"robot-{r.number}", []))
                     for r in robots if r.operator is operator for q in r.queries
                     if args.warmup_s <= q[0] <= end_v and q[1] <= drained_v
                     and q[3] == "succeeded"]
        priority = 0 if operator else (args.background_priority if scenario.priority else 0)
        calls = [r for r in finished if args.warmup_s <= r.arrival_v <= end_v and
                 (r.priority == 0) is operator and r.first_token_v is not None]
        ttft = [r.first_token_v - r.arrival_v for r in calls]
        classes[name] = {
            "robots": sum(1 for r in robots if r.operator is operator),
            "queries": len(latencies), "priority_sent": priority,
            "latency_p50_s": percentile(latencies, 50), "latency_p95_s": percentile(latencies, 95),
            "ttft_p50_s": percentile(ttft, 50), "ttft_p99_s": percentile(ttft, 99)}
    measured = [r for r in finished if args.warmup_s <= r.arrival_v <= end_v]
    prompt = sum(r.prompt_tokens for r in measured)
    cached = sum(r.cached_tokens for r in measured)
    failed = sum(1 for r in robots for q in r.queries if q[3] == "failed")
    return {"scenario": scenario.name, "robots": scenario.robots,
            "priority": scenario.priority, "prefix_cache": scenario.prefix_cache,
            "classes": classes, "calls": len(measured),
            "prefix_cache_hit_share": round(cached / prompt, 3) if prompt else None,
            "prompt_tokens_per_call": round(prompt / len(measured)) if measured else None,
            "failed_queries": failed, "byte_prefix": byte_prefix_share(bodies),
            "robot_side_s_p50": percentile([q[2] for r in robots for q in r.queries], 50),
            "queries_per_s": round(sum(1 for r in robots for q in r.queries
                                       if args.warmup_s <= q[0] <= end_v) / args.duration_s, 3),
            "unfinished_queries": unfinished}


def query_latency(query: tuple[float, float, float, str], requests: list) -> float:
    """A query's latency on the server: the time some call of it was in the engine (the union
    of its calls' [arrival, done] intervals, engine time). The robot's own time between the calls
    (agent core, segmenter double, encoding) is left out: here 100 robots share 2 cores, on a
    fleet each has its own computer (its time alone is reported beside); so are the HTTP round
    trips (0 on loopback; add the network's)."""
    start_v, end_v, _, _ = query
    spans = sorted((r.arrival_v, r.done_v) for r in requests
                   if start_v <= r.arrival_v <= end_v and r.done_v is not None)
    busy, reach = 0.0, float("-inf")
    for begin, done in spans:
        if done > reach:
            busy += done - max(begin, reach)
            reach = done
    return busy


def byte_prefix_share(bodies: list[tuple[str, str, dict]]) -> dict:
    """Byte prefixes of the main calls' messages (as JSON text): how much of a call the next
    call of the same query repeats at its start (``within_query_repeated``), how much of that
    next call is this repeat (``within_query_rounds``: the rest is the new turn), and how much
    of two robots' first calls start alike (``across_robots_*``)."""
    import json

    def text(body):
        return json.dumps(body.get("messages", []), ensure_ascii=False)

    def common(a: str, b: str) -> int:
        n = min(len(a), len(b))
        i = 0
        while i < n and a[i] == b[i]:
            i += 1
        return i

    by_robot: dict[str, list[str]] = {}
    for robot, kind, body in bodies:
        if kind == "main":
            by_robot.setdefault(robot, []).append(text(body))
    repeated, old = [], []
    for calls in by_robot.values():
        for before, after in zip(calls, calls[1:], strict=False):
            if after.count('"role": "assistant"') > before.count('"role": "assistant"'):
                shared = common(before, after)  # same query, next round
                repeated.append(shared / len(before))
                old.append(shared / len(after))
    firsts = [calls[0] for calls in by_robot.values()]
    across = [common(a, b) / len(b) for a, b in zip(firsts, firsts[1:], strict=False)]
    return {"within_query_repeated": round(statistics.mean(repeated), 3) if repeated else None,
            "within_query_rounds": round(statistics.mean(old), 3) if old else None,
            "across_robots_first_call": round(statistics.mean(across), 3) if across else None,
            "across_robots_common_chars": (common(firsts[0], firsts[1])
                                           if len(firsts) > 1 else None)}


def robots_held(results: list[dict], target_s: float) -> tuple[int | None, int | None]:
    """(the largest N that meets the target, the smallest N above it that misses it), of the
    recommended configuration (priority and prefix cache on): operator p95 <= target and no
    operator query left unfinished."""
    held = missed = None
    for result in sorted(results, key=lambda r: r["robots"]):
        if not (result["priority"] and result["prefix_cache"]):
            continue
        p95 = result["classes"]["operator"]["latency_p95_s"]
        if p95 is not None and p95 <= target_s and missed is None:
            held = result["robots"]
        elif missed is None:
            missed = result["robots"]
    return held, missed


def show(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def print_result(result: dict) -> None:
    print(f"{result['scenario']}: {result['queries_per_s']} queries/s, {result['calls']} calls "
          f"measured, {result['prompt_tokens_per_call']} prompt tokens/call, prefix-cache hits "
          f"{show(result['prefix_cache_hit_share'])}, failed queries {result['failed_queries']}, "
          f"robot-side time p50 {show(result['robot_side_s_p50'])} s (wall, shared cores)")
    for name, c in result["classes"].items():
        if c["robots"]:
            print(f"  {name:10s} {c['robots']:3d} robots {c['queries']:4d} queries: latency "
                  f"p50 {show(c['latency_p50_s'])} s p95 {show(c['latency_p95_s'])} s | TTFT "
                  f"p50 {show(c['ttft_p50_s'], 3)} s p99 {show(c['ttft_p99_s'], 3)} s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--fleet", type=int, nargs="+", default=[1, 10, 50, 100])
    parser.add_argument("--speed", type=float, default=8.0,
                        help="virtual (engine) seconds per wall second")
    parser.add_argument("--warmup-s", type=float, default=30.0, help="virtual seconds")
    parser.add_argument("--duration-s", type=float, default=90.0, help="virtual seconds")
    parser.add_argument("--drain-s", type=float, default=60.0,
                        help="virtual seconds the queries started in the window may take to end")
    parser.add_argument("--max-num-seqs", type=int, default=32,
                        help="the emulated server's batch limit (vLLM --max-num-seqs)")
    parser.add_argument("--operator-every", type=int, default=5)
    parser.add_argument("--operator-interval-s", type=float, default=30.0)
    parser.add_argument("--background-interval-s", type=float, default=20.0)
    parser.add_argument("--background-priority", type=int, default=10)
    parser.add_argument("--target-s", type=float, default=10.0,
                        help="operator query latency p95 target")
    parser.add_argument("--disconnect-trials", type=int, default=5,
                        help="trials of each stop path (bench/disconnect_timing.py)")
    parser.add_argument("--no-variants", action="store_true",
                        help="skip priority/prefix cache off at the largest N")
    args = parser.parse_args(argv)
    import os

    os.environ.setdefault(KEY_ENV, "EMPTY")
    disconnects = disconnect_timing.measure(args.disconnect_trials)
    for path, r in disconnects.items():
        print(f"disconnect on {path}: seen {r['seen']}/{r['trials']}, p50 {r['p50_ms']} ms, "
              f"max {r['max_ms']} ms after the stop")
    scenarios = [Scenario(n) for n in args.fleet]
    if not args.no_variants:
        largest = max(args.fleet)
        scenarios += [replace(Scenario(largest), priority=False),
                      replace(Scenario(largest), prefix_cache=False),
                      Scenario(largest, priority=False, prefix_cache=False)]
    results = []
    for scenario in scenarios:
        started = time.monotonic()
        result = run_scenario(scenario, args)
        result["wall_s"] = round(time.monotonic() - started, 1)
        results.append(result)
        print_result(result)
    held, missed = robots_held(results, args.target_s)
    print(f"robots one emulated server holds with operator p95 <= {args.target_s:g} s "
          f"(priority and prefix cache on, of N in {args.fleet}): {held}"
          + (f" (missed at {missed})" if missed else " (every N run met it)"))
    defaults = EngineParams()
    write_result("fleet", {"command": command_line(), "speed": args.speed,
                           "warmup_s": args.warmup_s, "duration_s": args.duration_s,
                           "operator_every": args.operator_every,
                           "operator_interval_s": args.operator_interval_s,
                           "background_interval_s": args.background_interval_s,
                           "background_priority": args.background_priority,
                           "max_num_seqs": args.max_num_seqs,
                           "target_s": args.target_s, "robots_held": held,
                           "robots_missed": missed, "drain_s": args.drain_s,
                           "sent_side": SENT_SIDE, "counted_side": COUNTED_SIDE,
                           "engine": defaults.__dict__, "results": results,
                           "disconnect_ms": disconnects})
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The docs/benchmarks.md section of bench/fleet.py (the emulated fleet), for bench/report.py:
``fleet_section(data)`` -> (the section's lines, its summary figures)."""

from __future__ import annotations


def _s(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def fleet_section(data: dict) -> tuple[list[str], list[tuple[str, str, str, bool | None]]]:
    engine = data["engine"]
    lines = [
        f"Command: `{data['command']}`", "",
        "**An emulator, not a GPU:** N robots (the real agent core and LLM client over HTTP, "
        "no ROS) against bench/vllm_emulator.py, a model of one vLLM server (continuous "
        f"batching, at most {data['max_num_seqs']} sequences; chunked prefill "
        f"{engine['prefill_s_per_token'] * 1e6:g} us/token within {engine['max_batched_tokens']} "
        f"tokens a step; decode step {engine['decode_step_s'] * 1e3:g} ms + "
        f"{engine['decode_s_per_seq'] * 1e3:g} ms per running sequence; "
        f"{engine['kv_cache_tokens'] // 1000}k KV tokens in {engine['block_size']}-token blocks; "
        "prefix cache by chained block hashes; waiting queue by priority), defaults from the "
        "published 8B-class figures of docs/fleet.md, time-scaled "
        f"x{data['speed']:g}: every time below is engine time. Calibrate on a GPU with the "
        "`vllm bench serve` command of docs/fleet.md.",
        "",
        f"Robots: 1 in {data['operator_every']} is an operator's (priority 0: no field sent), a "
        f"query every {data['operator_interval_s']:g} s on average; the others background "
        f"(llm.priority {data['background_priority']}), every "
        f"{data['background_interval_s']:g} s. A query = 5 calls (segment, examine with 2 "
        f"verifier calls of 3 images, select), images counted as {data['counted_side']} px "
        f"frames. {data['warmup_s']:g} s warm-up, {data['duration_s']:g} s measured (queries "
        "that start then are followed to their end). Latency = the time the query's calls "
        "spent in the server (the robot's own time and the network are left out).", "",
        "| robots | priority | prefix cache | class | queries | latency p50 s | p95 s | "
        "TTFT p50 s | p99 s | prefix hits | queries/s |",
        "|---|---|---|---|---|---|---|---|---|---|---|"]
    for result in data["results"]:
        for name, c in result["classes"].items():
            if not c["robots"]:
                continue
            lines.append(
                f"| {result['robots']} | {'on' if result['priority'] else 'off'} | "
                f"{'on' if result['prefix_cache'] else 'off'} | {name} ({c['robots']}) | "
                f"{c['queries']} | {_s(c['latency_p50_s'])} | {_s(c['latency_p95_s'])} | "
                f"{_s(c['ttft_p50_s'], 3)} | {_s(c['ttft_p99_s'], 3)} | "
                f"{_s(result['prefix_cache_hit_share'], 2)} | {result['queries_per_s']} |")
    recommended = [r for r in data["results"] if r["priority"] and r["prefix_cache"]]
    prefix = next((r["byte_prefix"] for r in recommended
                   if r["byte_prefix"]["across_robots_common_chars"] is not None), None)
    held, missed = data["robots_held"], data.get("robots_missed")
    lines += ["", f"Robots one emulated server holds with the operators' p95 <= "
              f"{data['target_s']:g} s (priority and prefix cache on): **{held}** of the N "
              f"run{f' (missed at {missed})' if missed else ''}."]
    if prefix:
        lines.append(
            f"Byte prefix share of the requests (messages as JSON text): the next main call of "
            f"a query starts with {prefix.get('within_query_repeated', 0) or 0:.0%} of the call "
            f"before it, byte for byte (that repeat is {prefix['within_query_rounds']:.0%} of "
            f"the next call, the rest is the new turn); two robots' first calls share their first "
            f"{prefix['across_robots_common_chars']} characters (system prompt and framing: "
            "their frames differ).")
    disconnects = data.get("disconnect_ms") or {}
    if disconnects:
        lines += ["", "Cancel means disconnect (bench/disconnect_timing.py: the real client "
                  "against the scripted server, which watches its client's socket every 10 ms): "
                  "from the stop to the server seeing the connection close.", "",
                  "| stop | trials seen | p50 ms | max ms |", "|---|---|---|---|"]
        lines += [f"| {path} | {r['seen']}/{r['trials']} | {_s(r['p50_ms'])} | "
                  f"{_s(r['max_ms'])} |" for path, r in disconnects.items()]
    figures: list[tuple[str, str, str, bool | None]] = [
        ("Fleet (emulated vLLM): robots per server, operator p95 <= "
         f"{data['target_s']:g} s", f"{held} (missed at {missed})", "tens (issue 38 estimate)",
         None)]
    largest = max(data["results"], key=lambda r: (r["robots"], r["priority"], r["prefix_cache"]))
    off = next((r for r in data["results"] if r["robots"] == largest["robots"]
                and not r["priority"] and r["prefix_cache"]), None)
    if off is not None:
        on_p95 = largest["classes"]["operator"]["latency_p95_s"]
        off_p95 = off["classes"]["operator"]["latency_p95_s"]
        figures.append((f"Fleet (emulated): operator p95 at N={largest['robots']}, priority "
                        "on / off", f"{_s(on_p95)} s / {_s(off_p95)} s", "on < off",
                        None if on_p95 is None or off_p95 is None else on_p95 < off_p95))
    if disconnects:
        worst = max((r["max_ms"] for r in disconnects.values() if r["max_ms"] is not None),
                    default=None)
        every = all(r["seen"] == r["trials"] for r in disconnects.values())
        figures.append(("A stopped call's connection closed (cancel, preempt, deadline, timeout, "
                        "shutdown)", f"max {_s(worst)} ms", "< 1000 ms",
                        every and worst is not None and worst < 1000))
    return lines, figures

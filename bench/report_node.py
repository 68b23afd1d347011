"""Sections of docs/benchmarks.md (bench/report.py): the node's costs and bounds (node costs,
memory soak, the action, answer memory, exit, console, query bursts, log floods). Each builder
takes its benchmark's JSON and returns its ``Section``."""

from __future__ import annotations

from pathlib import Path

from report_base import Section


def node_costs(data: dict) -> Section:
    s = Section("4. Node costs over rclpy (DDS on loopback)")
    phases = data["phases"]
    load = data.get("machine", {}).get("load_avg_1min")
    s.add(f"Command: `{data['command']}`"
          + (f" (run {data['finished']}, 1-minute load average {load:g})"
             if load is not None and "finished" in data else ""), "",
          f"One publisher sends rgb8 frames at {data['rate_hz']:g} Hz (best effort, keep last 1) "
          "to three subscriber processes at once: the node (`sam3_agent_node`, offline "
          "backends, active, no query), a bare rclpy subscriber with the same QoS and a "
          "callback that keeps a reference (SingleThreadedExecutor), and the same bare "
          "subscriber spinning a 4-thread MultiThreadedExecutor like the node. CPU = user + "
          f"system of each process over {data['window_s']:g} s windows, % of one core. DDS "
          f"profile: `{Path(data['dds_profile']).name}`.", "",
          "| frames | node % | bare subscriber % | bare, MultiThreadedExecutor % | "
          "node beyond bare % |", "|---|---|---|---|---|")
    names = {"idle": "none (idle)", "480p": "640x480 @ 30 Hz", "1080p": "1920x1080 @ 30 Hz"}
    for key, label in names.items():
        p = phases.get(key)
        if p:
            s.add(f"| {label} | {p['node_cpu_percent']:.1f} | {p['bare_cpu_percent']:.1f} | "
                  f"{p['bare_multi_cpu_percent']:.1f} | {p['node_beyond_bare_percent']:.1f} |")
    s.add("", f"Frames received by the bare subscriber: {data['bare_received'].get('frames')}.")
    missed = []
    for key in ("480p", "1080p"):
        p = phases.get(key)
        if p:
            ok = p["node_beyond_bare_percent"] <= 5
            s.figure(f"node CPU beyond DDS receive, {names[key]}",
                     f"{p['node_beyond_bare_percent']:.1f} % of a core (node "
                     f"{p['node_cpu_percent']:.1f} %, bare {p['bare_cpu_percent']:.1f} %)",
                     "<= 5 %", ok)
            if not ok:
                missed.append(p)
    if missed:
        s.add("", "**Target missed.** The bare subscriber with the node's 4-thread "
              "MultiThreadedExecutor costs almost as much as the node itself: the extra CPU is "
              "rclpy's MultiThreadedExecutor per message (it hands every callback to a thread "
              "pool and rebuilds its wait set), not the node's callback (which stores a "
              "reference). Fix: receive images on a SingleThreadedExecutor (or rclpy's "
              "EventsExecutor) in its own thread and keep the MultiThreadedExecutor for the "
              "lifecycle services and the query topic.")
    pub = data.get("publish_1080p") or {}
    if pub.get("answer"):
        answer, follow = pub["answer"], pub["follow"]
        side, quality = pub["overlay_max_side"], pub["jpeg_quality"]
        sizes = pub.get("bytes", {})
        s.add("", "Publishing the images of one answer at 1920x1080 (2 selected masks) through "
              "the node's own publishers, a subscriber process on every image topic (reliable), "
              f"median of {pub['publishes']}, side by side in one run. Before: the wave-2 path "
              "(union and labels each painted from the masks, the overlay drawn at full size, "
              "sent as rgb8). After: `ros/outputs.py` (pixel boxes found once, labels painted "
              "once and the union derived from them, the overlay drawn once at "
              f"`overlay.max_side` {side}, JPEG quality {quality}). Build + `publish()`, the "
              "result JSON included; CPU = the publishing thread's. The cases run in turn, "
              "round by round.", "",
              "| answer | topics | ms | CPU ms |", "|---|---|---|---|")
        rows = [("before (wave 2)", "mask + labels + overlay (rgb8 1920x1080)", "before"),
                ("after", f"mask + labels + overlay (rgb8, {side} px)", "after"),
                ("after", f"mask + labels + overlay/compressed ({side} px JPEG)", "after_jpeg"),
                ("after, `overlay.max_side` 0", "mask + labels + overlay/compressed "
                 "(1920x1080 JPEG)", "after_full_size_jpeg"),
                ("after", "mask + labels", "after_mask_labels")]
        for label, topics, key in rows:
            if key in answer:
                s.add(f"| {label} | {topics} | {answer[key]['wall_ms']:.1f} | "
                      f"{answer[key]['cpu_ms']:.1f} |")
        if "before_build_only" in answer:
            s.add("", f"Building the images without `publish()`: before "
                  f"{answer['before_build_only']['wall_ms']:.1f} ms, after "
                  f"{answer['after_build_only']['wall_ms']:.1f} ms. Message sizes after: "
                  + ", ".join(f"{kind} {size / 1024:.0f} KiB" for kind, size in sizes.items())
                  + ".")
        s.add("", "One follow-mode update (every followed frame), the same frame and masks, "
              "`~/follow/status` included:", "",
              "| follow update | topics subscribed | ms | CPU ms |", "|---|---|---|---|")
        rows = [("before (wave 2)", "follow/mask + follow/labels", "before"),
                ("after", "follow/mask + follow/labels", "after"),
                ("after", "follow/mask + follow/labels + follow/overlay/compressed",
                 "after_with_overlay"),
                ("after", "follow/overlay/compressed", "overlay_only")]
        for label, topics, key in rows:
            if key in follow:
                s.add(f"| {label} | {topics} | {follow[key]['wall_ms']:.1f} | "
                      f"{follow[key]['cpu_ms']:.1f} |")
        after, jpeg = answer["after"], answer["after_jpeg"]
        ok = after["wall_ms"] <= 10
        s.figure("publish mask + labels + overlay, 1920x1080 (before -> after)",
                 f"{answer['before']['wall_ms']:.1f} -> {after['wall_ms']:.1f} ms (CPU "
                 f"{answer['before']['cpu_ms']:.1f} -> {after['cpu_ms']:.1f})", "<= 10 ms", ok)
        s.figure("the same with overlay/compressed (JPEG) for the overlay",
                 f"{jpeg['wall_ms']:.1f} ms (CPU {jpeg['cpu_ms']:.1f})")
        s.figure("follow update at 1920x1080: mask + labels (+ overlay/compressed)",
                 f"{follow['after']['wall_ms']:.1f} ms "
                 f"({follow['after_with_overlay']['wall_ms']:.1f} ms; wave 2 "
                 f"{follow['before']['wall_ms']:.1f} ms)")
        if not ok:
            s.add("", "**Target missed.** Most of what is left is rclpy's `publish()` of the two "
                  "full-size mono8 images (~2 MB each: conversion, serialisation and the "
                  "shared-memory copy); they are published only when subscribed.")
    elif pub:  # a result file of the wave-2 bench
        ok = pub["total_ms"] <= 10
        s.add("", f"Publishing mask + labels + overlay for a 1920x1080 frame with 2 selected "
              f"masks (median of {pub['publishes']}): {pub['total_ms']:.1f} ms, of which "
              f"rendering + conversion {pub['render_convert_ms']:.1f} ms and `publish()` "
              f"{pub['publish_calls_ms']:.1f} ms.")
        s.figure("publish mask + labels + overlay, 1920x1080", f"{pub['total_ms']:.1f} ms",
                 "<= 10 ms", ok)
    return s


def _refinements(data: dict) -> str:
    if "refinements" not in data:
        return ""
    return (f", {data['refinements']} of them refinements of the query before, on its frame, "
            f"with the answer store of refine.keep_answers={data['keep_answers']} full; the mean "
            f"below is of the others, {data['mean_refinement_ms']:.1f} ms per refinement")


def memory_soak(data: dict) -> Section:
    s = Section("5. Memory soak")
    growth = data["rss_growth_mib"]
    s.add(f"Command: `{data['command']}`", "",
          f"{data['queries']} offline queries (Agent + OfflinePlanner + ColorSegmenter, "
          f"data/example_tabletop.png {data['width']}x{data['height']}, one agent, a new frame "
          f"array per query{_refinements(data)}) after {data['warmup_queries']} warm-up "
          "queries: RSS "
          f"{data['rss_start_mib']:.1f} -> {data['rss_end_mib']:.1f} MiB ({growth:+.1f} MiB); "
          f"live RSS (after `gc.collect()` + `malloc_trim(0)`) {data['live_rss_start_mib']:.1f} "
          f"-> {data['live_rss_end_mib']:.1f} MiB ({data['live_rss_growth_mib']:+.1f} MiB); "
          f"mean {data['mean_query_ms']:.1f} ms per query; statuses {data['statuses']}.", "",
          "Raw RSS moves up and down by tens of MiB from one query to the next: glibc keeps "
          "freed frame-sized blocks for reuse. The live RSS is what a leak would grow; a "
          "1500-query run under tracemalloc also showed the Python heap flat (1.80 -> 1.83 "
          "MiB).")
    s.figure(f"memory soak, RSS growth over {data['queries']} queries",
             f"{growth:+.1f} MiB raw, {data['live_rss_growth_mib']:+.1f} MiB live",
             "<= 50 MB", growth <= 50)
    s.figure("offline query latency (640x480)", f"{data['mean_query_ms']:.1f} ms/query")
    return s


def segment_action(data: dict) -> Section:
    s = Section("10. The action ~/segment: goal to result over ROS")
    goal, topic = data["goal_to_result_ms"], data["topic_round_trip_ms"]
    s.add("Command: `python bench/segment_action.py`", "",
          f"One node (offline backends, 640x480 frames), {goal['n']} queries each way; the agent "
          f"itself takes {data['agent_total_ms']['median']} ms (median).", "",
          "| path | median ms | p90 ms |", "|---|---|---|",
          f"| action goal -> result in the client | {goal['median']} | {goal['p90']} |",
          f"| topic query -> `~/result` | {topic['median']} | {topic['p90']} |")
    s.figure("action goal -> result (offline backends, 640x480)",
             f"{goal['median']} ms median (topic query {topic['median']} ms)")
    return s


def action_memory(data: dict) -> Section:
    s = Section("12. Action results: node memory after a 1080p goal flood")
    runs = {run["config"]: run for run in data["runs"]}
    goals = data["runs"][0]["goals"]
    s.add(f"Command: `{data['command']}`", "",
          f"{goals} goals on one node (offline backends, {data['width']}x{data['height']} frames, "
          "query_policy queue so every goal succeeds); each finished result holds mask + labels "
          f"= {data['result_images_mib']:.1f} MiB. `bounded`: the defaults "
          "(action.result_timeout_s 10, action.max_results_with_images 16); `unbounded`: 900 s "
          "(rclpy's default before Kilted, none set before issue 17) and every result keeping "
          "its images. RSS of the node process, MiB (heap = RssAnon; the rest is mostly libraries "
          "and Fast DDS's shared-memory segment, mapped since the warm-up goal). The answer store "
          "(refine.keep_answers 8, for refinements) also stays: the goals of one camera frame "
          "share one kept copy of it (before issue 25 each decoded copy was kept: +70 MiB).", "",
          "| config | baseline | peak | at the last result | later | later - baseline | "
          "heap baseline -> later |", "|---|---|---|---|---|---|---|")
    for name, run in runs.items():
        base, last, after = run["baseline_mib"], run["at_last_result_mib"], run["after_mib"]
        s.add(f"| {name} | {base['rss']} | {run['peak_rss_mib']} | {last['rss']} | "
              f"{after['rss']} ({run['after_s']:g} s later) | {after['rss'] - base['rss']:+d} | "
              f"{base['anon']} -> {after['anon']} |")
    bounded = runs.get("bounded")
    if bounded:
        base, after = bounded["baseline_mib"]["rss"], bounded["after_mib"]["rss"]
        s.figure(f"action goal flood ({goals} x 1080p): node RSS peak / after the timeout",
                 f"+{bounded['peak_rss_mib'] - base} / {after - base:+d} MiB over the baseline"
                 + (f" (unbounded: +{runs['unbounded']['peak_rss_mib'] - base} / "
                    f"{runs['unbounded']['after_mib']['rss'] - base:+d})"
                    if "unbounded" in runs else ""),
                 "after: <= +50 MiB", after - base <= 50)
    return s


def answer_memory(data: dict) -> Section:
    s = Section("16. Answers kept for refinement: node memory on near-cap frames")
    runs = {run["config"]: run for run in data["runs"]}
    answers = data["runs"][0]["answers"]
    s.add(f"Command: `{data['command']}`", "",
          f"{answers} topic queries, one at a time, each on its own {data['width']}x"
          f"{data['height']} JPEG frame (just under max_image_pixels; decoded "
          f"{data['frame_mib']:.0f} MiB), on one node (offline backends); the node keeps the "
          "last refine.keep_answers (8) answers for refinement, each with its frame and its "
          f"selected masks (bit-packed). `bounded`: the defaults (refine.max_kept_mib "
          f"{data['max_kept_mib']}); `unbounded`: refine.max_kept_mib at its maximum (only the "
          "count bounds the store, as before the byte bound). RSS of the node process, MiB; "
          "the baseline is read after a 640x480 warm-up query. Beyond the kept answers the node "
          "holds the colour segmenter's analysis of the latest frame (about 2 frame sizes). "
          "Then refinements of the eighth newest and of the newest answer show what is still "
          "kept.", "",
          "| config | baseline | peak | at the last result | after idle | after - baseline | "
          "refine eighth newest | refine newest |", "|---|---|---|---|---|---|---|---|")
    for name, run in runs.items():
        base, last, after = run["baseline_mib"], run["at_last_result_mib"], run["after_mib"]
        refined = [run["refinements"][f"n{answers - back}"] for back in (8, 1)]
        s.add(f"| {name} | {base['rss']} | {run['peak_rss_mib']} | {last['rss']} | "
              f"{after['rss']} ({run['idle_s']:g} s later) | {after['rss'] - base['rss']:+d} | "
              + " | ".join(r["status"] + (f": {r['error']}" if r["error"] else "")
                           for r in refined) + " |")
    bounded, unbounded = runs.get("bounded"), runs.get("unbounded")
    if bounded:
        grown = bounded["after_mib"]["rss"] - bounded["baseline_mib"]["rss"]
        # The kept answers: at most max_kept_mib. On top, what the last query leaves: the colour
        # segmenter's analysis of the latest frame (2 frame sizes) and one frame of slack.
        limit = data["max_kept_mib"] + 3 * data["frame_mib"]
        value = f"{grown:+d} MiB after idle"
        if unbounded:
            held = unbounded["after_mib"]["rss"] - unbounded["baseline_mib"]["rss"]
            value += f" (unbounded: {held:+d}, {grown / max(held, 1):.2f}x)"
        s.figure(f"{answers} answers on near-cap frames: node RSS over the baseline", value,
                 f"<= max_kept_mib + {limit - data['max_kept_mib']:.0f} MiB", grown <= limit)
    return s


def node_exit(data: dict) -> Section:
    s = Section("15. The node's exit after Ctrl-C, after real work")
    s.add(f"Command: `{data['command']}`", "",
          f"One node process per run (offline planner; the segmenter takes {data['segment_s']:g} "
          "s for a prompt with the word \"slow\", like SAM 3 on a CPU, milliseconds otherwise), "
          "fed 640x480 frames at 15 Hz; before the signal it answered a topic query, an action "
          "goal and a followed query. SIGINT while following (`following`), while a slow query "
          "or goal is inside the segmenter (`mid_query`, `mid_goal`), or while the follow "
          "thread's re-detection is (`mid_redetect`); seconds from SIGINT to the exit. "
          f"{data['runs']} runs per scenario, interleaved. The launch file sends SIGTERM 3 s "
          "after SIGINT.", "",
          "| scenario | median s | max s | under the bound | exit statuses | tracebacks |",
          "|---|---|---|---|---|---|")
    for scenario, row in data["scenarios"].items():
        s.add(f"| {scenario} | {row['median_s']:.2f} | {row['max_s']:.2f} | "
              f"{row['within_bound']}/{row['runs']} | {row['statuses']} | {row['tracebacks']} |")
    worst = max(row["max_s"] for row in data["scenarios"].values())
    ok = all(row["within_bound"] == row["runs"] and row["statuses"] == [0]
             for row in data["scenarios"].values())
    s.figure("node exit after SIGINT, even mid-query (max over every run)", f"{worst:.2f} s",
             f"< {data['bound_s']:g} s, status 0", ok)
    return s


def console_cost(data: dict) -> Section:
    s = Section("18. The operator console beside the node (1080p camera at 30 Hz, a page open)")
    s.add(f"Command: `{data['command']}`", "",
          f"A {data['resolution']} rgb8 camera at {data['rate_hz']:g} Hz into the node (offline "
          "backends); turns of the node alone and of the node with `sam3-agent console` and one "
          f"open page (a WebSocket client reading everything), {data['rounds']} each, "
          f"{data['window_s']:g} s windows, alternating. CPU from /proc (user + system), % of "
          "one core, medians.", "",
          "| figure | value |", "|---|---|",
          f"| console process | {data['console_cpu_percent']:.1f} % |",
          f"| node alone | {data['node_cpu_percent_without']:.1f} % |",
          f"| node with the console | {data['node_cpu_percent_with']:.1f} % |",
          f"| node with / alone | x{data['node_ratio']} |",
          f"| live previews to the page | {data['page_images_per_s']} /s |")
    s.figure("Console CPU, 1080p camera at 30 Hz, a page open",
             f"{data['console_cpu_percent']:.1f} % of a core", f"<= {data['bound_percent']:g} %",
             data["console_cpu_percent"] <= data["bound_percent"])
    ratio = data["node_ratio"]
    s.figure("Node CPU with the console / without", f"x{ratio}", "unchanged (<= x1.15)",
             ratio is not None and ratio <= 1.15)
    return s


def query_burst(data: dict) -> Section:
    s = Section("19. Bursts of topic queries: one result each")
    s.add(f"Command: `{data['command']}`", "",
          f"One node process (`query_policy: {data['policy']}`, `queue_size: "
          f"{data['queue_size']}`: most of a burst is answered \"queue full\" at once), a "
          "camera at 15 Hz; this process sends each burst back to back from a writer of the "
          "given history depth (rclpy's default is 10) and counts the results (each id once).",
          "",
          "| writer depth | burst | results | answered twice | last result after |",
          "|---|---|---|---|---|")
    for row in data["bursts"]:
        s.add(f"| {row['writer_depth']} | {row['size']} | {row['results']} | {row['twice']} | "
              f"{row['seconds']:.2f} s |")
    s.add("", "A writer shallower than the burst can lose samples itself before they reach the "
          "node (its keep-last history replaces what the middleware has not delivered yet); "
          "the target is for writers at least as deep as the burst.")
    deep = [row for row in data["bursts"] if row["writer_depth"] >= row["size"]] or data["bursts"]
    worst = min(row["results"] / row["size"] for row in deep)
    ok = all(row["results"] == row["size"] and not row["twice"] for row in deep)
    s.figure("results per burst of topic queries (writer as deep as the burst)", f"{worst:.0%}",
             "100 %, each once", ok)
    return s


def log_floods(data: dict) -> Section:
    s = Section("20. Log lines under a peer's flood")
    s.add(f"Command: `{data['command']}`", "",
          f"One node process; each flood {data['seconds']:g} s as fast as one client goes. Lines "
          "of that kind per second in the node's log, and whether a line said how many were "
          "suppressed.", "",
          "| flood | requests/s | log lines/s | count said |", "|---|---|---|---|")
    for row in data["floods"]:
        s.add(f"| {row['flood']} | {row['sent_per_s']} | {row['lines_per_s']:.1f} | "
              f"{'yes' if row['count_said'] else 'no'} |")
    worst = max(row["lines_per_s"] for row in data["floods"])
    s.figure("log lines/s under a peer's flood (worst kind)", f"{worst:.1f} /s",
             "<= 10 /s, with the count", worst <= 10 and all(r["count_said"]
                                                            for r in data["floods"]))
    return s

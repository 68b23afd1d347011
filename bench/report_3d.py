"""Sections of docs/benchmarks.md (bench/report.py): 3D, follow and concepts (follow node and
cost, box fit, concepts batch, TF and cloud). Each builder takes its benchmark's JSON and returns
its ``Section``."""

from __future__ import annotations

from report_base import Section


def follow_node(data: dict) -> Section:
    s = Section(f"8. Follow mode: node CPU with frames at {data['rate_hz']:g} Hz")
    s.add(f"Command: `{data['command']}`", "",
          "`sam3_agent_node` (offline backends, no depth) receiving the moving tabletop at "
          f"{data['rate_hz']:g} Hz (sensor_data QoS), one node process per `follow.mode`; "
          "`frames only`: nothing followed; `following`: after a followed query succeeded, with "
          "a subscriber on `~/follow/status` and `~/follow/mask`. % of one core over "
          f"{data['window_s']:g} s. Updates/s below the frame rate are frames dropped by the "
          "newest-only slot (by design: latency never queues up); latency is frame received -> "
          "update computed (median).", "",
          "| mode | frame | frames only % | following % | updates/s | latency ms |",
          "|---|---|---|---|---|---|")
    for mode, by_resolution in data["modes"].items():
        for resolution, r in by_resolution.items():
            s.add(f"| {mode} | {resolution} | {r['frames_only_cpu_percent']:.1f} | "
                  f"{r['following_cpu_percent']:.1f} | {r['updates_per_s']:.1f} | "
                  f"{r['latency_ms_median']} |")
    flow = data["modes"].get("flow", {}).get("480p")
    if flow:
        s.figure("node CPU following (flow) at 30 Hz, 640x480",
                 f"{flow['following_cpu_percent']:.1f} % of a core "
                 f"({flow['updates_per_s']:.1f} updates/s)")
    return s


def follow_cost(data: dict) -> Section:
    s = Section(f"9. Follow mode: cost per frame ({data['threads']} thread)")
    s.add(f"Command: `{data['command']}`", "",
          f"The moving tabletop sequence, {data['frames']} frames per mode, colour segmenter for "
          "re-detection; CPU ms is the one-core cost, wall ms includes waiting for the CPU on a "
          "shared machine.", "",
          "| frame | mode | CPU ms/frame | wall ms mean | sustained fps | mean IoU |",
          "|---|---|---|---|---|---|")
    for resolution, modes in data["results"].items():
        for mode, r in modes.items():
            s.add(f"| {resolution} | {mode} | {r['cpu_mean_ms']} | {r['mean_ms']} | "
                  f"{r['sustained_fps']} | {r['mean_iou']} |")
    sam3 = data.get("sam3_cpu")
    if sam3:
        s.add("", f"SAM 3 on this CPU ({sam3['weights']} weights, {sam3['torch_threads']} torch "
                  f"thread): one `redetect` update on {sam3['frame']} took "
                  f"{sam3['redetect_update_s']} s (model build {sam3['load_s']} s).")
    flow = data["results"].get("640x480", {}).get("flow")
    if flow:
        s.figure("follow `flow`, CPU per 640x480 frame (one core)", f"{flow['cpu_mean_ms']} ms",
                 "<= 10 ms", flow["cpu_mean_ms"] <= 10)
    return s


def box_fit(data: dict) -> Section:
    s = Section("13. The 3D box: accuracy against depth noise, cost beside the position")
    s.add(f"Command: `{data['command']}`", "",
          "Every object of the tabletop and rotated scenes (turned and leaning faces) at "
          "640x480, f = 600 px, 0.85-1 m: millimetre depth with Gaussian noise, 10 % holes, "
          "1 % flying pixels; masks exact, or spilling 2 px onto the table around the object. "
          f"{data['noise']['seeds']} seeds per level. On target: centre 1 cm, the two largest "
          "sizes 10 %, in-plane angle of the long axis 10 degrees.", "",
          "| spill | noise | on target | centre cm (median / max) | sizes % (median / max) | "
          "angle deg (median / max) |", "|---|---|---|---|---|---|")
    for row in data["accuracy"]:
        s.add(f"| {row['spill_px']} px | {row['noise_mm']:g} mm | {row['on_target']}/"
              f"{row['boxes']} | {row['centre_cm_median']} / {row['centre_cm_max']} | "
              f"{row['size_pct_median']} / {row['size_pct_max']} | {row['angle_deg_median']} / "
              f"{row['angle_deg_max']} |")
    s.add("", "| frame | masks (median px) | position ms (CPU) | position + box ms (CPU) |",
          "|---|---|---|---|")
    for name, row in data["cost"].items():
        s.add(f"| {name} | {row['masks']} ({row['mask_pixels_median']}) | {row['position_ms']} "
              f"({row['position_cpu_ms']}) | {row['position_and_box_ms']} "
              f"({row['position_and_box_cpu_ms']}) |")
    exact = [r for r in data["accuracy"] if r["spill_px"] == 0 and r["noise_mm"] <= 10]
    if exact:
        on, total = sum(r["on_target"] for r in exact), sum(r["boxes"] for r in exact)
        s.figure("3D boxes on target, depth noise 0-10 mm (exact masks)", f"{on}/{total}",
                 "all", on == total)
    return s


def concepts_batch(data: dict) -> Section:
    s = Section("14. Standing concepts: k concepts in one pass vs k separate passes")
    s.add(f"Command: `{data['command']}`", "",
          f"Prompts {', '.join(repr(p) for p in data['prompts'])} (the first k). One pass: every "
          "prompt in one segmenter call on a new frame object (`segment_prompts` -> "
          "`segment_many`: the colour segmenter's per-image analysis once; SAM 3's image backbone "
          "and text encoder once, one grounding pass batched over the prompts). k separate "
          "passes: each prompt on its own copy of the frame. Colour segmenter: medians of "
          f"{data['iterations']} frames (wall), mean process CPU.", "",
          "| segmenter | frame | k | one pass ms | k separate passes ms | separate / one | "
          "CPU ms one / separate |", "|---|---|---|---|---|---|---|")
    for resolution, rows in data["colour"].items():
        for row in rows:
            s.add(f"| colour | {resolution} | {row['k']} | {row['one_pass_ms']} | "
                  f"{row['separate_ms']} | {row['ratio']}x | {row['one_pass_cpu_ms']} / "
                  f"{row['separate_cpu_ms']} |")
    sam3 = data.get("sam3_cpu")
    if sam3:
        for row in sam3["rows"]:
            s.add(f"| SAM 3 CPU ({sam3['weights']} weights) | {sam3['frame']} | {row['k']} | "
                  f"{row['one_pass_ms']} | {row['separate_ms']} | {row['ratio']}x | |")
        s.add("", f"SAM 3: one frame per measurement, {sam3['torch_threads']} torch threads, "
                  f"model build {sam3['load_s']} s; k = 1 is one full pass (the model's first: "
                  "it includes a one-time warm-up of the prompt path); k separate passes add the "
                  "full passes of the first k prompts, each measured. Measured "
                  f"{sam3['measured']}.")
    load = data.get("machine", {}).get("load_avg_1min")
    if load is not None:
        s.add("", f"1-minute load average when the run finished: {load:g} (on 2 cores: the "
                  "machine was shared, absolute times are noisy; the ratios are side by side).")
    k4 = next((r for r in sam3["rows"] if r["k"] == 4), None) if sam3 else None
    if k4:
        s.figure("standing concepts, SAM 3 CPU, 4 concepts: one pass vs 4 passes",
                 f"{k4['one_pass_ms'] / 1000:.1f} s vs {k4['separate_ms'] / 1000:.1f} s "
                 f"({k4['ratio']}x)")
    colour = next((r for r in data["colour"].get("640x480", []) if r["k"] == 4), None)
    if colour:
        s.figure("standing concepts, colour 640x480, 4 concepts: one pass vs 4 passes",
                 f"{colour['one_pass_ms']} vs {colour['separate_ms']} ms ({colour['ratio']}x)")
    return s


def tf_cloud(data: dict) -> Section:
    s = Section("17. The robot frame and the target's point cloud: cost per answer")
    steps = data["steps"]
    camera, robot = steps["node_camera_frame"], steps["node_robot_frame"]
    s.add(f"Command: `{data['command']}`", "",
          f"{data['resolution']}, {data['masks']} masks of {data['mask_pixels']} px -> "
          f"{data['cloud_points']} points in the cloud (at most {data['max_points']}, grid step "
          f"{data['grid_step']}). The node's path side by side, {data['repeat']} pairs (ABBA), "
          "one OpenCV thread: the camera-frame path against `target_frame` + the cloud; the "
          "figure is the median of the pairs' differences, beside the masks' measurement both "
          "paths share. Each step alone is timed right after what precedes it on the node: the "
          "cloud's sampling after the masks' sampling (inside the 3D step, before the box "
          "fits), the others after a whole 3D step.",
          "", "| | ms | CPU ms |", "|---|---|---|",
          f"| node's path, camera frame (whole) | {camera['ms']} | |",
          f"| node's path, robot frame + cloud (whole) | {robot['ms']} | |",
          f"| beside the measurement, camera frame | {camera['beside_measurement_ms']} | "
          f"{camera['beside_measurement_cpu_ms']} |",
          f"| beside the measurement, robot frame + cloud | {robot['beside_measurement_ms']} | "
          f"{robot['beside_measurement_cpu_ms']} |")
    for name in ("tf_lookup", "targets", "cloud_sampling", "cloud_placing", "point_cloud2"):
        s.add(f"| {name.replace('_', ' ')} alone | {steps[name]['ms']} | "
              f"{steps[name]['cpu_ms']} |")
    if "added_whole_ms" in data:
        s.add(f"| the whole paths' difference (the shared measurement's noise included) | "
              f"{data['added_whole_ms']} | |")
    s.figure("robot frame + point cloud per answer, the node's path (1080p, 2 masks)",
             f"{data['added_ms']} ms", f"<= {data['target_ms']:g} ms",
             data["added_ms"] <= data["target_ms"])
    return s


def grasp_scene(data: dict) -> Section:
    s = Section("22. The grasp scene: cost per answer beside the 3D step")
    steps = data["steps"]
    s.add(f"Command: `{data['command']}`", "",
          f"{data['resolution']}, {data['masks']} masks of {data['mask_pixels']} px (the block "
          "tabletop: a target 1.5 cm from a segmented neighbour and one nobody segmented); "
          f"{data['cloud_points']} scene points (at most {data['max_points']}, grid step "
          f"{data['cloud_step']}); {data['grasps']} of {data['candidates']} grasp candidates "
          f"clear; box height errors {data['height_errors_mm']} mm. The camera-frame 3D step "
          f"and the same followed by the grasp scene, {data['repeat']} pairs (ABBA), one "
          "OpenCV thread; the figure is the median of the pairs' differences. Each step alone "
          "is timed right after a 3D step.",
          "", "| | ms | CPU ms |", "|---|---|---|",
          f"| camera-frame 3D step | {steps['camera_frame_ms']} | |",
          f"| 3D step + grasp scene | {steps['with_grasp_scene_ms']} | |")
    for name in ("support_fits", "scene_cloud", "grasps"):
        s.add(f"| {name.replace('_', ' ')} alone | {steps[name]['ms']} | "
              f"{steps[name]['cpu_ms']} |")
    s.add(f"| added (median of the pairs' differences) | {steps['added_ms']} | "
          f"{steps['added_cpu_ms']} |")
    s.figure("grasp scene per answer beside the 3D step (1080p, 3 masks)",
             f"{steps['added_ms']} ms (3D step + grasp scene: x{data['ratio']:.2f})",
             f"<= {data['target_ms']:g} ms", steps["added_ms"] <= data["target_ms"])
    return s

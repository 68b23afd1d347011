"""SAM 3 latency through our backend, per engine: image encoder, per prompt, feature reuse.

For each iteration a NEW frame is segmented with k prompts on every engine (``--engines``,
default torch and onnxruntime side by side on ONE loaded model, their order alternating from
one iteration to the next so a loaded machine slows both alike). The first call on a frame is a
full pass (image encoder + text + grounding); the next k-1 reuse the frame's features.
Reported per engine (medians): image-encoder ms, first-prompt ms, later-prompt ms, full pass,
k prompts with reuse vs k full passes; then onnxruntime's speed-up over torch (the ratio of the
medians), the first-use export cost (time, size, peak RSS; ``--engine-dir`` reuses an export
instead) and the process's RSS after each engine is built. Without ``--checkpoint`` it uses
random weights (latency does not depend on the weights; results are marked untrained).

    python bench/sam3_latency.py                       # CPU here: k=2, 1 iteration (~6 min)
    python bench/sam3_latency.py --engines torch       # torch alone (~3 min)
    python bench/sam3_latency.py --device cuda --iterations 20 --prompts 4
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from sam3_agent_ros.config import SegmenterConfig  # noqa: E402
from sam3_agent_ros.segmenters.sam3 import Sam3Segmenter  # noqa: E402

PROMPTS = ("red cup", "blue box", "the leftmost bottle", "person", "green apple", "chair",
           "white plate", "black cable")


def make_frame(width: int, height: int, seed: int) -> np.ndarray:
    """The repository's tabletop frame when available (bench/common.py), else a synthetic one."""
    try:
        from bench.common import bench_frame

        return bench_frame(width, height, seed=seed)
    except Exception:  # noqa: BLE001 - cv2 or the example image missing: any frame will do
        rng = np.random.default_rng(seed)
        frame = np.full((height, width, 3), 180, np.uint8)
        for _ in range(6):
            x, y = rng.integers(0, width - width // 6), rng.integers(0, height - height // 6)
            frame[y:y + height // 6, x:x + width // 6] = rng.integers(0, 255, 3)
        return frame


def median_ms(values: list[float]) -> float | None:
    return round(statistics.median(values) * 1000, 1) if values else None


def leave_out_tensorrt() -> None:
    """The engine's provider choice without TensorRT (``--ort-providers cuda``)."""
    from sam3_agent_ros.segmenters import ort_sessions

    choose = ort_sessions.choose_providers

    def without_tensorrt(device: str, available: list[str], **options):
        return choose(device, [p for p in available if p != ort_sessions.TENSORRT], **options)

    ort_sessions.choose_providers = without_tensorrt


def rss_gib() -> float | None:
    try:
        import psutil
    except ImportError:
        return None
    return round(psutil.Process().memory_info().rss / 2**30, 2)


def build_engines(args: argparse.Namespace, cfg, loaded) -> tuple[dict, dict, dict | None]:
    """{engine: segmenter} on the one loaded model, {engine: its build's time and the RSS
    after it}, and the export's figures (None when ``--engine-dir`` names an export or
    onnxruntime is not asked for)."""
    segmenters, builds, export = {}, {}, None
    for engine in args.engines:
        engine_cfg = dataclasses.replace(cfg, engine=engine)
        if engine == "onnxruntime":
            folder = args.engine_dir
            if not folder:  # the first-use export, measured, into a fresh folder
                from sam3_agent_ros.segmenters.sam3_engine import export_engine

                folder = tempfile.mkdtemp(prefix="sam3_engine_")
                dtype = "float16" if loaded.on_cuda and args.engine_dtype == "" \
                    else (args.engine_dtype or "float32")
                report = export_engine(loaded, Path(folder), dtype)
                print(f"export: {report.summary()}", file=sys.stderr, flush=True)
                export = {"seconds": round(report.seconds, 1),
                          "gib": round(report.bytes / 2**30, 2),
                          "peak_rss_gib": round(report.peak_rss_gib, 2), "dtype": dtype,
                          "parts": sorted(report.manifest["parts"]),
                          "in_torch": sorted(report.manifest["in_torch"])}
            engine_cfg = dataclasses.replace(engine_cfg, engine_dir=folder)
        started = time.perf_counter()
        segmenters[engine] = Sam3Segmenter(engine_cfg, loaded=loaded)
        builds[engine] = {"engine_load_s": round(time.perf_counter() - started, 2),
                          "rss_after_build_gib": rss_gib()}
    return segmenters, builds, export


def run(args: argparse.Namespace) -> dict:
    import torch

    from sam3_agent_ros.segmenters.sam3_model import load_sam3

    cfg = dataclasses.replace(SegmenterConfig(), backend="sam3", device=args.device,
                              dtype=args.dtype, checkpoint=args.checkpoint,
                              random_weights=not args.checkpoint, bpe_path=args.bpe_path,
                              confidence_threshold=args.confidence_threshold)
    started = time.perf_counter()
    loaded = load_sam3(cfg)
    load_s = time.perf_counter() - started
    model_rss = rss_gib()
    segmenters, builds, export = build_engines(args, cfg, loaded)
    on_cuda = loaded.on_cuda
    if on_cuda:
        torch.cuda.reset_peak_memory_stats(loaded.device)
    prompts = [PROMPTS[i % len(PROMPTS)] for i in range(args.prompts)]
    samples: dict[str, dict[str, list]] = {
        engine: {"backbone": [], "first_prompt": [], "later_prompt": [], "full_pass": [],
                 "reuse_total": [], "post": [], "detections": []} for engine in segmenters}
    for iteration in range(args.iterations):
        frame = make_frame(args.width, args.height, seed=iteration)
        order = list(segmenters) if iteration % 2 == 0 else list(reversed(segmenters))
        for engine in order:
            segmenter, got = segmenters[engine], samples[engine]
            own_frame = frame.copy()  # every engine caches its own frame
            frame_started = time.perf_counter()
            for index, prompt in enumerate(prompts):
                call_started = time.perf_counter()
                result = segmenter.segment(own_frame, prompt)
                call_s = time.perf_counter() - call_started
                timings = segmenter.last_timings
                got["post"].append(timings["postprocess_s"])
                got["detections"].append(len(result.scores))
                if index == 0:
                    got["backbone"].append(timings["backbone_s"])
                    got["first_prompt"].append(timings["prompt_s"])
                    got["full_pass"].append(call_s)
                else:
                    got["later_prompt"].append(call_s)
            got["reuse_total"].append(time.perf_counter() - frame_started)
            print(f"iteration {iteration + 1}/{args.iterations} {engine}: image encoder "
                  f"{got['backbone'][-1] * 1000:.1f} ms, frame total "
                  f"{got['reuse_total'][-1] * 1000:.1f} ms", file=sys.stderr, flush=True)
    k = args.prompts
    report = {
        "device": loaded.device,
        "device_name": (torch.cuda.get_device_name(loaded.device) if on_cuda
                        else platform.processor() or "CPU"),
        "dtype": loaded.dtype, "resolution": 1008, "frame": f"{args.width}x{args.height}",
        "weights": "checkpoint" if args.checkpoint else "random (untrained)",
        "torch": torch.__version__, "iterations": args.iterations, "prompts_per_frame": k,
        "cpu_threads": torch.get_num_threads(), "load_s": round(load_s, 2),
        "load_timings_s": {key: round(v, 2) for key, v in loaded.load_timings.items()},
        "model_rss_gib": model_rss, "engines": {}, "export": export,
    }
    for engine, got in samples.items():
        segmenter = segmenters[engine]
        full_pass_ms = median_ms(got["full_pass"])
        reuse_ms = median_ms(got["reuse_total"])
        report["engines"][engine] = {
            **segmenter.engine_info, **builds[engine],
            "backbone_ms": median_ms(got["backbone"]),
            "first_prompt_ms": median_ms(got["first_prompt"]),
            "later_prompt_ms": median_ms(got["later_prompt"]),
            "full_pass_ms": full_pass_ms, "postprocess_ms": median_ms(got["post"]),
            f"k{k}_with_reuse_ms": reuse_ms,
            f"k{k}_full_passes_ms": round(k * full_pass_ms, 1),
            "reuse_speedup": round(k * full_pass_ms / reuse_ms, 2),
            "backbone_calls": segmenter.backbone_calls,
            "median_masks_kept": statistics.median(got["detections"]),
        }
    if {"torch", "onnxruntime"} <= set(report["engines"]):
        torch_r, ort_r = report["engines"]["torch"], report["engines"]["onnxruntime"]
        report["onnxruntime_speedup"] = {
            key: round(torch_r[f"{key}_ms"] / ort_r[f"{key}_ms"], 2)
            for key in ("backbone", "first_prompt", "later_prompt", "full_pass")}
    if on_cuda:
        report["peak_cuda_allocated_gib"] = round(
            torch.cuda.max_memory_allocated(loaded.device) / 2**30, 2)
    report["rss_gib"] = rss_gib()
    for segmenter in segmenters.values():
        segmenter.close()
    loaded.release()
    return report


def print_table(report: dict) -> None:
    k = report["prompts_per_frame"]
    engines = list(report["engines"])
    rows = [
        ("image encoder", "backbone_ms", "ms"),
        ("first prompt on a frame", "first_prompt_ms", "ms"),
        ("later prompt (reuses features)", "later_prompt_ms", "ms"),
        ("full pass (encoder + prompt + post)", "full_pass_ms", "ms"),
        (f"{k} prompts with reuse", f"k{k}_with_reuse_ms", "ms"),
        (f"{k} full passes", f"k{k}_full_passes_ms", "ms"),
        ("reuse speed-up", "reuse_speedup", "x"),
        ("RSS after the engine's build", "rss_after_build_gib", "GiB"),
    ]
    width = max(len(name) for name, _, _ in rows)
    print(f"SAM 3 latency, {report['iterations']} iteration(s), medians, {report['weights']} "
          f"weights, frame {report['frame']}, {report['device_name']} ({report['device']}, "
          f"{report['dtype']}), model load {report['load_s']} s")
    print(f"  {'':<{width}}  " + "  ".join(f"{e:>14}" for e in engines))
    for name, key, unit in rows:
        cells = [f"{report['engines'][e][key]} {unit}" for e in engines]
        print(f"  {name:<{width}}  " + "  ".join(f"{c:>14}" for c in cells))
    for engine, info in report["engines"].items():
        if info.get("segmenter_providers"):
            print(f"  {engine}: providers {info['segmenter_providers']}; ONNX parts "
                  f"{info['segmenter_onnx_parts']}; in torch {info['segmenter_torch_parts']}")
    if "onnxruntime_speedup" in report:
        print("  onnxruntime speed-up over torch: " + ", ".join(
            f"{k_} {v}x" for k_, v in report["onnxruntime_speedup"].items()))
    if report["export"]:
        e = report["export"]
        print(f"  first-use export: {e['seconds']} s, {e['gib']} GiB ({e['dtype']}), peak RSS "
              f"{e['peak_rss_gib']} GiB")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="", help="'' (cuda if available), cuda, cuda:N, cpu")
    parser.add_argument("--dtype", default="", help="'' (bf16 on CUDA, fp32 on CPU)")
    parser.add_argument("--checkpoint", default="", help="sam3.pt; empty: random weights")
    parser.add_argument("--bpe-path", default="")
    parser.add_argument("--iterations", type=int, default=None,
                        help="frames (default 20 on CUDA, 1 on CPU)")
    parser.add_argument("--prompts", type=int, default=None,
                        help="prompts per frame k (default 4 on CUDA, 2 on CPU)")
    parser.add_argument("--width", type=int, default=1008)
    parser.add_argument("--height", type=int, default=1008)
    parser.add_argument("--confidence-threshold", type=float, default=0.5)
    parser.add_argument("--engines", default="",
                        help="comma-separated: torch, onnxruntime (default both when "
                             "onnxruntime is installed, else torch)")
    parser.add_argument("--engine-dir", default="",
                        help="an export to run (sam3-agent export-engine); default: export "
                             "into a fresh folder and report the cost")
    parser.add_argument("--engine-dtype", default="", choices=("", "float32", "float16"),
                        help="the export's dtype (default float16 on CUDA, float32 on CPU)")
    parser.add_argument("--ort-providers", default="", choices=("", "cuda", "tensorrt"),
                        help="onnxruntime on a GPU: 'cuda' leaves TensorRT out (the CUDA "
                             "provider's figures), 'tensorrt' or '' the engine's own order")
    parser.add_argument("--dry-run", action="store_true",
                        help="check the arguments, print the plan and exit (no model)")
    parser.add_argument("--json", default="", help="also write the report here")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    if args.dry_run:
        cuda = args.device.startswith("cuda")
    else:
        import torch

        cuda = torch.cuda.is_available() and not args.device.startswith("cpu")
    if args.iterations is None:
        args.iterations = 20 if cuda else 1
    if args.prompts is None:
        args.prompts = 4 if cuda else 2
    if args.prompts < 2 or args.iterations < 1:
        parser.error("--prompts must be >= 2 and --iterations >= 1")
    import importlib.util

    default = "torch,onnxruntime" if importlib.util.find_spec("onnxruntime") else "torch"
    args.engines = [e.strip() for e in (args.engines or default).split(",") if e.strip()]
    if not args.engines or set(args.engines) - {"torch", "onnxruntime"}:
        parser.error("--engines takes torch and/or onnxruntime")
    if args.dry_run:
        print("dry run: " + json.dumps({key: value for key, value in vars(args).items()
                                        if key != "dry_run"}))
        return 0
    if args.ort_providers == "cuda":
        leave_out_tensorrt()
    report = run(args)
    report["command"] = " ".join(["python bench/sam3_latency.py",
                                  *(argv if argv is not None else sys.argv[1:])]).strip()
    print_table(report)
    print(json.dumps(report))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    try:
        from bench.common import write_result

        write_result("sam3_latency", report)
    except Exception:  # noqa: BLE001 - results dir is a convenience, the table is printed
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``sam3-agent export-engine``: the ONNX export of SAM 3 for ``segmenter.engine: onnxruntime``.

    sam3-agent export-engine --out DIR [--dtype float32|float16] [-p segmenter.NAME:=VALUE ...]

Builds the model the segmenter parameters describe (``segmenter.checkpoint``, or
``segmenter.random_weights: true``), exports the parts that export (docs/sam3.md) into DIR with
their manifest, and prints what it wrote: the parts, the time, the size and the peak memory.
The export traces the float32 model on ``segmenter.device`` (empty: the CPU, which needs no
GPU: export on a PC, copy DIR to the robot, set ``segmenter.engine_dir``); ``--dtype float16``
converts the graphs for GPUs (TensorRT, CUDA). Exit status: 0 written, 1 the model could not be
built or exported, 2 bad usage, parameters, or something the export needs is missing.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from sam3_agent_ros.inputs import add_config_arguments, load_config

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def register(subparsers) -> None:
    """Add ``export-engine`` to the ``sam3-agent`` sub-command parsers."""
    command = subparsers.add_parser(
        "export-engine", help="export SAM 3 to ONNX for segmenter.engine onnxruntime",
        description=__doc__.split("\n\n")[0])
    command.add_argument("--out", required=True, metavar="DIR",
                         help="folder for the ONNX files and manifest.json (created)")
    command.add_argument("--dtype", choices=("float32", "float16"), default="float32",
                         help="float16 for GPUs (TensorRT, CUDA); float32 (default) for CPUs")
    add_config_arguments(command)
    command.set_defaults(handler=cmd_export_engine)


def cmd_export_engine(args: argparse.Namespace) -> int:
    from sam3_agent_ros.config import ConfigError
    from sam3_agent_ros.core.errors import SegmenterError

    try:
        config = load_config(args.params_file, args.overrides, args.offline)
    except (ConfigError, ValueError) as exc:
        print(f"sam3-agent export-engine: {exc}", file=sys.stderr)
        return EXIT_USAGE
    segmenter = config.segmenter
    if segmenter.backend != "sam3":
        print(f"sam3-agent export-engine: segmenter.backend is {segmenter.backend!r}; only "
              "'sam3' has an engine to export", file=sys.stderr)
        return EXIT_USAGE
    # The export needs no GPU: an empty device means the CPU here (float32 trace).
    segmenter = dataclasses.replace(segmenter, device=segmenter.device or "cpu", dtype="",
                                    engine="onnxruntime")
    from sam3_agent_ros.segmenters.ort_sessions import import_onnxruntime
    from sam3_agent_ros.segmenters.sam3_engine import export_engine
    from sam3_agent_ros.segmenters.sam3_files import check_loadable
    from sam3_agent_ros.segmenters.sam3_model import load_sam3

    try:  # milliseconds: what is missing (packages, vocabulary, weights) before the build
        check_loadable(segmenter)
        import_onnxruntime()
    except (ConfigError, SegmenterError) as exc:
        print(f"sam3-agent export-engine: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        loaded = load_sam3(segmenter)
    except (ConfigError, SegmenterError) as exc:
        print(f"sam3-agent export-engine: {exc}", file=sys.stderr)
        return EXIT_USAGE if isinstance(exc, ConfigError) else EXIT_FAILED
    try:
        report = export_engine(loaded, Path(args.out), args.dtype)
    except Exception as exc:  # noqa: BLE001 - exporter, disk full, ...: one line, exit 1
        print(f"sam3-agent export-engine: export failed: {type(exc).__name__}: "
              f"{' '.join(str(exc).split())[:400]}", file=sys.stderr)
        return EXIT_FAILED
    print(report.summary())
    for name, reason in (report.manifest.get("in_torch") or {}).items():
        print(f"  {name} stays in torch: {reason}")
    print(json.dumps({"folder": str(report.folder), "seconds": round(report.seconds, 1),
                      "bytes": report.bytes, "peak_rss_gib": round(report.peak_rss_gib, 2),
                      "dtype": args.dtype, "parts": sorted(report.manifest["parts"]),
                      "weights_sha256": report.manifest["weights_sha256"]}))
    return EXIT_OK

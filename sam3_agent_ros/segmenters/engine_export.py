"""Exporting parts of a torch model to ONNX files plus a manifest (``engine_manifest``).

``export_parts`` runs ``torch.onnx.export`` (the dynamo exporter, weights in external data
files) on each ``PartExport``, converts the graphs to float16 when asked (inputs and outputs stay
float32: the engine's interface does not change), describes every file's inputs and outputs and
writes the manifest last. A part that does not export is not fatal: it is listed under
``in_torch`` with the exporter's reason and the engine runs it in torch. The work happens in a
``.partial-*`` folder inside the target; files move in only when all are written, and a
previous manifest is removed first, so a reader never takes a half-written export for a whole
one. ``ExportReport`` has the time, the size and the peak memory (resident set size sampled
every 50 ms while exporting).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import importlib.metadata
import logging
import os
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sam3_agent_ros.segmenters.engine_manifest import (
    FORMAT,
    MANIFEST_NAME,
    export_bytes,
    write_manifest,
)
from sam3_agent_ros.segmenters.sam3_onnx_parts import PartSpec

log = logging.getLogger(__name__)
_ONNX_DTYPES = {1: "float32", 10: "float16", 7: "int64", 9: "bool", 6: "int32", 11: "float64"}


@dataclasses.dataclass
class PartExport:
    """What to export: the part's names, its torch module, example inputs and, optionally,
    ``dynamic_shapes`` for ``torch.onnx.export`` (e.g. a number of prompts)."""

    spec: PartSpec
    module: Any
    inputs: tuple
    dynamic_shapes: Any = None


@dataclasses.dataclass(frozen=True)
class ExportReport:
    folder: Path
    manifest: dict
    seconds: float
    peak_rss_gib: float
    bytes: int

    def summary(self) -> str:
        parts = ", ".join(self.manifest["parts"]) or "none"
        kept = ", ".join(self.manifest.get("in_torch") or {}) or "none"
        return (f"exported {parts} ({self.manifest['dtype']}, opset {self.manifest['opset']}) "
                f"to {self.folder} in {self.seconds:.1f} s: {self.bytes / 2**30:.2f} GiB, peak "
                f"RSS {self.peak_rss_gib:.2f} GiB; in torch: {kept}")


def export_parts(parts: list[PartExport], folder: Path, *, dtype: str, weights_sha256: str,
                 context: Callable[[], Any] = contextlib.nullcontext,
                 kept_in_torch: dict[str, str] | None = None,
                 extra: dict | None = None) -> ExportReport:
    """Export ``parts`` into ``folder`` (created) with ``dtype`` 'float32' or 'float16'; each
    export runs inside ``context()`` (e.g. sam3_compat's CPU device mode). ``kept_in_torch``:
    parts not tried, with the reason, for the manifest's ``in_torch``; ``extra`` goes into the
    manifest as is. Raises ``RuntimeError`` when no part exports."""
    if dtype not in ("float32", "float16"):
        raise ValueError(f"dtype {dtype!r} is not float32 or float16")
    folder = Path(folder).expanduser()
    folder.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        (folder / MANIFEST_NAME).unlink()  # from now on the folder is not a usable export
    partial = folder / f".partial-{os.getpid()}-{threading.get_ident()}"
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir()
    started = time.perf_counter()
    exported: dict[str, dict] = {}
    in_torch: dict[str, str] = dict(kept_in_torch or {})
    opset = 0
    try:
        with PeakRss() as peak:
            for part in parts:
                part_started = time.perf_counter()
                try:
                    with context():
                        opset = max(opset, _export_one(part, partial, dtype))
                except Exception as exc:  # noqa: BLE001 - exporter errors are many and varied
                    in_torch[part.spec.name] = _reason(exc)
                    log.warning("ONNX export of %s failed, it stays in torch: %s",
                                part.spec.name, in_torch[part.spec.name])
                    for leftover in partial.glob(f"{part.spec.name}.*"):
                        leftover.unlink()
                    continue
                exported[part.spec.name] = describe_part(partial, part.spec.name)
                exported[part.spec.name]["seconds"] = round(time.perf_counter() - part_started, 1)
        if not exported:
            raise RuntimeError("no part of the model exported to ONNX: "
                               + "; ".join(f"{k}: {v}" for k, v in in_torch.items()))
        for path in partial.iterdir():
            path.replace(folder / path.name)
        seconds = time.perf_counter() - started
        manifest = {"format": FORMAT, "weights_sha256": weights_sha256, "dtype": dtype,
                    "opset": opset, "parts": exported, "in_torch": in_torch,
                    "versions": _versions(), **(extra or {})}
        manifest["export"] = {"seconds": round(seconds, 1),
                              "peak_rss_gib": round(peak.gib, 2),
                              "bytes": export_bytes(manifest),
                              "created": datetime.datetime.now(datetime.timezone.utc).isoformat(
                                  timespec="seconds")}
        write_manifest(folder, manifest)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return ExportReport(folder, manifest, seconds, peak.gib, manifest["export"]["bytes"])


def _export_one(part: PartExport, folder: Path, dtype: str) -> int:
    """Export one part into ``folder``/<name>.onnx (+ .onnx.data); its opset."""
    import onnx
    import torch

    path = folder / f"{part.spec.name}.onnx"
    with warnings_quiet():
        torch.onnx.export(part.module, part.inputs, str(path), dynamo=True, external_data=True,
                          input_names=list(part.spec.inputs),
                          output_names=list(part.spec.outputs),
                          dynamic_shapes=part.dynamic_shapes, verbose=False)
    if dtype == "float16":  # converted from the saved float32 graph (fits in memory)
        from onnxruntime.transformers.float16 import convert_float_to_float16

        model = convert_float_to_float16(onnx.load(str(path)), keep_io_types=True,
                                         disable_shape_infer=True)
        for old in folder.glob(f"{part.spec.name}.onnx*"):
            old.unlink()
        onnx.save_model(model, str(path), save_as_external_data=True,
                        all_tensors_to_one_file=True, location=f"{path.name}.data",
                        size_threshold=1024)
    else:
        model = onnx.load(str(path), load_external_data=False)
    return max((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")),
               default=0)


def describe_part(folder: Path, name: str) -> dict:
    """A part's file sizes and its inputs and outputs (name, shape with symbolic sizes as
    names, dtype), read from the graph without loading the weights."""
    import onnx

    path = folder / f"{name}.onnx"
    graph = onnx.load(str(path), load_external_data=False).graph

    def tensors(values: Any) -> list[dict]:
        out = []
        for value in values:
            kind = value.type.tensor_type
            shape = [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?")
                     for d in kind.shape.dim]
            out.append({"name": value.name, "shape": shape,
                        "dtype": _ONNX_DTYPES.get(kind.elem_type, str(kind.elem_type))})
        return out

    files = {p.name: p.stat().st_size for p in sorted(folder.glob(f"{name}.onnx*"))}
    return {"file": path.name, "files": files, "inputs": tensors(graph.input),
            "outputs": tensors(graph.output)}


@contextlib.contextmanager
def warnings_quiet():
    """No warnings, and the exporter's loggers at WARNING: at INFO its graph passes log one
    line per folded initializer (thousands for SAM 3)."""
    import warnings

    loggers = [logging.getLogger(name) for name in ("onnx_ir", "onnxscript", "torch.onnx")]
    levels = [logger.level for logger in loggers]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for logger in loggers:
            logger.setLevel(max(logger.getEffectiveLevel(), logging.WARNING))
        try:
            yield
        finally:
            for logger, level in zip(loggers, levels):
                logger.setLevel(level)


def _reason(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:400]}"


def _versions() -> dict[str, str]:
    versions = {}
    for name in ("sam3", "torch", "onnx", "onnxscript", "onnxruntime", "onnxruntime-gpu"):
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            versions[name] = importlib.metadata.version(name)
    return versions


class PeakRss:
    """The process's peak resident set size while the block runs (psutil, sampled every 50 ms;
    without psutil the process's lifetime peak, ``ru_maxrss``)."""

    def __init__(self, interval_s: float = 0.05):
        self.gib = 0.0
        self._interval = interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> PeakRss:
        try:
            import psutil
        except ImportError:
            return self
        process = psutil.Process()

        def sample() -> None:
            while True:
                self.gib = max(self.gib, process.memory_info().rss / 2**30)
                if self._stop.wait(self._interval):
                    return

        self._thread = threading.Thread(target=sample, name="peak-rss", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        else:
            import resource

            self.gib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20

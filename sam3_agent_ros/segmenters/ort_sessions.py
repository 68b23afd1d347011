"""ONNX Runtime sessions for the exported parts of SAM 3: the providers and the runs.

- ``choose_providers``: TensorRT -> CUDA -> CPU, those this onnxruntime build has, for the torch
  device in use (``cpu``: the CPU provider only). Pure.
- ``PartSession``: one part's session; ``run`` takes and returns torch tensors through ONNX
  Runtime's I/O binding (inputs read in place, outputs written into tensors allocated on the
  device the session computes on: no host round trip on a GPU). ``providers`` are those the
  session really uses (ONNX Runtime drops a provider that fails to load, e.g. TensorRT without
  its libraries).

onnxruntime and torch are imported inside the functions that need them.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from sam3_agent_ros.segmenters.sam3_files import Sam3LoadError

log = logging.getLogger(__name__)

TENSORRT = "TensorrtExecutionProvider"
CUDA = "CUDAExecutionProvider"
CPU = "CPUExecutionProvider"
_ORT_DTYPES = {"tensor(float)": "float32", "tensor(float16)": "float16",
               "tensor(int64)": "int64", "tensor(bool)": "bool", "tensor(int32)": "int32"}


def choose_providers(device: str, available: list[str], *, fp16: bool,
                     cache_dir: str | None = None) -> list[tuple[str, dict[str, Any]]]:
    """The providers (name, options) to ask for, best first: on ``cuda:N`` TensorRT (its engine
    cache in ``cache_dir``, fp16 kernels when the export is fp16) and CUDA on device N where
    this build has them, then the CPU; on ``cpu`` the CPU alone."""
    chosen: list[tuple[str, dict[str, Any]]] = []
    if device.startswith("cuda"):
        index = int(device.partition(":")[2] or 0)
        if TENSORRT in available:
            options: dict[str, Any] = {"device_id": index, "trt_fp16_enable": fp16}
            if cache_dir:
                options.update(trt_engine_cache_enable=True, trt_engine_cache_path=cache_dir,
                               trt_timing_cache_enable=True, trt_timing_cache_path=cache_dir)
            chosen.append((TENSORRT, options))
        if CUDA in available:
            chosen.append((CUDA, {"device_id": index}))
    chosen.append((CPU, {}))
    return chosen


def import_onnxruntime() -> Any:
    try:
        import onnxruntime
    except ImportError:
        raise Sam3LoadError("segmenter.engine 'onnxruntime' needs the onnxruntime package: pip "
                            "install onnxruntime (CPU) or onnxruntime-gpu (CUDA, TensorRT), "
                            "docs/sam3.md") from None
    return onnxruntime


class PartSession:
    """One exported part on ONNX Runtime. ``run(tensors)`` -> output tensors, in the part's
    order; inputs may live on the CPU or the session's GPU."""

    def __init__(self, path: Path, device: str, *, fp16: bool, threads: int = 0,
                 trt_cache_dir: str | None = None):
        ort = import_onnxruntime()
        self._torch = _import_torch()
        wanted = choose_providers(device, ort.get_available_providers(), fp16=fp16,
                                  cache_dir=trt_cache_dir)
        if any(name == CUDA for name, _ in wanted):
            _preload_cuda_libraries(ort)
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.intra_op_num_threads = threads or (os.cpu_count() or 1)
        options.log_severity_level = 3  # errors only: the fallbacks are reported by us
        # No CPU arena: it would keep the image encoder's largest activations (GiBs) for the
        # process's life; without it they go back to the system after each pass.
        options.enable_cpu_mem_arena = False
        try:
            self.session = ort.InferenceSession(str(path), options,
                                                providers=[p for p, _ in wanted],
                                                provider_options=[o for _, o in wanted])
        except Exception as exc:  # noqa: BLE001 - ORT raises its own Fail/InvalidGraph/...
            reason = " ".join(str(exc).split())[:300]
            raise Sam3LoadError(f"ONNX Runtime cannot load {path}: {type(exc).__name__}: "
                                f"{reason} (export again: sam3-agent export-engine)") from None
        self.providers: list[str] = list(self.session.get_providers())
        skipped = [p for p, _ in wanted if p not in self.providers]
        if skipped:
            log.warning("ONNX Runtime: %s could not be used for %s (missing libraries?); "
                        "running on %s", ", ".join(skipped), Path(path).name,
                        ", ".join(self.providers))
        self.on_gpu = self.providers[0] in (TENSORRT, CUDA)
        self.device = device if self.on_gpu else "cpu"
        self.inputs = [(i.name, _ORT_DTYPES.get(i.type, i.type)) for i in self.session.get_inputs()]
        self.outputs = [(o.name, o.shape, _ORT_DTYPES.get(o.type, o.type))
                        for o in self.session.get_outputs()]

    def run(self, *tensors: Any) -> list[Any]:
        """Bind ``tensors`` (one per input, cast and moved as the session needs), run, and return
        the outputs as torch tensors on the session's device (``self.device``)."""
        torch = self._torch
        if len(tensors) != len(self.inputs):
            raise ValueError(f"{len(self.inputs)} inputs expected, got {len(tensors)}")
        binding = self.session.io_binding()
        sizes: dict[str, int] = {}
        kept = []  # the bound tensors must outlive the run
        for (name, dtype), tensor in zip(self.inputs, tensors):
            tensor = tensor.to(device=self.device, dtype=getattr(torch, dtype)).contiguous()
            kept.append(tensor)
            binding.bind_input(name, *self._where(), _numpy_type(dtype), tuple(tensor.shape),
                               tensor.data_ptr())
            sizes.update(_symbol_sizes(self.session, name, tensor.shape))
        results: list[Any] = []
        for name, shape, dtype in self.outputs:
            if all(isinstance(d, int) or d in sizes for d in shape):
                concrete = tuple(d if isinstance(d, int) else sizes[d] for d in shape)
                out = torch.empty(concrete, dtype=getattr(torch, dtype), device=self.device)
                results.append(out)
                binding.bind_output(name, *self._where(), _numpy_type(dtype), concrete,
                                    out.data_ptr())
            else:  # a size no input tells: ONNX Runtime allocates it, copied out below
                results.append(None)
                binding.bind_output(name, *self._where())
        if self.on_gpu:
            torch.cuda.synchronize(self.device)  # inputs written by torch streams are ready
        self.session.run_with_iobinding(binding)
        del kept
        if any(r is None for r in results):
            values = binding.get_outputs()
            results = [torch.from_numpy(values[i].numpy()).to(self.device) if r is None else r
                       for i, r in enumerate(results)]
        return results

    def _where(self) -> tuple[str, int]:
        if self.on_gpu:
            return "cuda", int(self.device.partition(":")[2] or 0)
        return "cpu", 0


def _preload_cuda_libraries(ort: Any) -> None:
    """onnxruntime-gpu >= 1.21 finds CUDA and cuDNN in the nvidia-* pip packages (the
    ``onnxruntime-gpu[cuda,cudnn]`` extras) only when asked to load them first."""
    preload = getattr(ort, "preload_dlls", None)
    if callable(preload):
        try:
            preload()
        except Exception as exc:  # noqa: BLE001 - the system's libraries may serve instead
            log.debug("onnxruntime.preload_dlls: %s", exc)


def _symbol_sizes(session: Any, name: str, shape: Any) -> dict[str, int]:
    """Symbolic dimension name -> size, from the bound input ``name`` of that ``shape``."""
    declared = next(i.shape for i in session.get_inputs() if i.name == name)
    return {d: int(s) for d, s in zip(declared, shape) if isinstance(d, str)}


def _numpy_type(dtype: str) -> Any:
    import numpy as np

    return {"float32": np.float32, "float16": np.float16, "int64": np.int64, "bool": np.bool_,
            "int32": np.int32}[dtype]


def _import_torch() -> Any:
    import torch

    return torch

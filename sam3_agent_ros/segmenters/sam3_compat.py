"""Compatibility fixes that let ``sam3`` 0.1.4 run on a CPU-only torch (see ENVIRONMENT.md).

Applied by ``Sam3Segmenter`` only when its device is the CPU; nothing here runs on CUDA. Remove
each fix once upstream no longer needs it:

1. ``define_torchvision_op_schemas``: a torchvision wheel built for CUDA fails to import beside a
   CPU torch because its fake-kernel registrations need the ``torchvision::nms``/``qnms`` op
   schemas, which its (unloadable) C extension would have defined. We define the schemas only
   (the image model never calls them). Must run before torchvision is first imported.
2. ``stub_triton_only_module``: ``sam3.model.edt`` imports ``triton`` at module level, yet only the
   video tracker uses it. When triton is not installed we register a stand-in for that one sam3
   module (rather than a fake ``triton``, which would mislead torch's own triton checks).
3. ``CpuDeviceMode``: sam3 hard-codes ``device="cuda"`` (position encoding, decoder) and calls
   ``Tensor.pin_memory()`` (geometry encoder). Building and inference run under this
   ``TorchFunctionMode``, which maps those to the CPU. Torch function modes are thread-local:
   enter it in the thread that calls the model. ``Sam3Processor`` also needs ``device="cpu"``.

Every fix is idempotent.
"""

from __future__ import annotations

import contextlib
import importlib.util
import sys
import types
from pathlib import Path
from typing import Any

_SCHEMAS = {
    "nms": "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qnms": "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
}
_library = None  # keeps the torch.library.Library holding our definitions alive
EDT_MODULE = "sam3.model.edt"


def define_torchvision_op_schemas() -> None:
    """Define ``torchvision::nms``/``qnms`` schemas if nothing defined them (fix 1)."""
    global _library
    import torch

    if "torchvision" in sys.modules or all(_op_exists(torch, name) for name in _SCHEMAS):
        return
    _try_load_torchvision_extension(torch)  # a matching build defines the real ops
    missing = [name for name in _SCHEMAS if not _op_exists(torch, name)]
    if not missing:
        return
    if _library is None:
        _library = torch.library.Library("torchvision", "FRAGMENT")
    for name in missing:
        _library.define(_SCHEMAS[name])


def _try_load_torchvision_extension(torch: Any) -> None:
    spec = importlib.util.find_spec("torchvision")
    if spec is None or not spec.submodule_search_locations:
        return
    for folder in spec.submodule_search_locations:
        for library in sorted(Path(folder).glob("_C.*")):
            # A build for another torch fails to load; torchvision's own import skips it too.
            with contextlib.suppress(OSError, RuntimeError):
                torch.ops.load_library(str(library))
            return


def _op_exists(torch: Any, name: str) -> bool:
    try:
        torch._C._dispatch_find_schema_or_throw(f"torchvision::{name}", "")
    except RuntimeError:
        return False
    return True


def stub_triton_only_module() -> None:
    """Register a stand-in ``sam3.model.edt`` when triton is missing (fix 2)."""
    if EDT_MODULE in sys.modules or importlib.util.find_spec("triton") is not None:
        return
    module = types.ModuleType(EDT_MODULE)
    module.__doc__ = "Stand-in (sam3_agent_ros): the triton EDT kernel is unavailable on CPU."

    def edt_triton(*_args: Any, **_kwargs: Any) -> Any:
        raise RuntimeError("edt_triton needs triton (SAM 3 video tracker only); not on CPU")

    vars(module).update(edt_triton=edt_triton, SAM3_AGENT_STUB=True)
    sys.modules[EDT_MODULE] = module


def make_cpu_device_mode() -> Any:
    """Return a fresh ``TorchFunctionMode`` mapping CUDA devices to CPU (fix 3)."""
    import torch
    from torch.overrides import TorchFunctionMode

    pin_memory = torch.Tensor.pin_memory

    class CpuDeviceMode(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if func is pin_memory:
                return args[0]
            device = kwargs.get("device")
            if device is not None and _is_cuda(device):
                kwargs = {**kwargs, "device": "cpu"}
            return func(*args, **kwargs)

    return CpuDeviceMode()


def _is_cuda(device: Any) -> bool:
    if isinstance(device, str):
        return device.startswith("cuda")
    return getattr(device, "type", None) == "cuda"


def apply_import_fixes() -> None:
    """Fixes 1 and 2; call before the first ``import torchvision`` / ``import sam3``."""
    define_torchvision_op_schemas()
    stub_triton_only_module()

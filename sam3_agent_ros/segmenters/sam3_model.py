"""Loading SAM 3's image model: device and dtype, weights, the build, the compute context.

``load_sam3(cfg)`` returns a ``LoadedSam3`` (the torch model and sam3's processor, on the
resolved device) that one or more engines (``sam3_engine``) run; it fails fast with one-line
errors (``Sam3LoadError`` or ``ConfigError``). On CPU the compatibility fixes of ``sam3_compat``
are applied and only float32 is allowed. The vocabulary and checkpoint are found, checked and
fetched by ``sam3_files``. torch and sam3 are imported inside the functions.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
import warnings
from pathlib import Path
from typing import Any

from sam3_agent_ros.config import ConfigError
from sam3_agent_ros.segmenters.engine_manifest import weights_hash
from sam3_agent_ros.segmenters.sam3_files import (
    HUB_FILENAME,
    HUB_REPO,
    Sam3LoadError,
    check_checkpoint_path,
    check_weights_choice,
    download_checkpoint,
    find_bpe,
    read_checkpoint,
    select_image_weights,
)
from sam3_agent_ros.segmenters.sam3_onnx_parts import RESOLUTION

log = logging.getLogger(__name__)


def resolve_device(requested: str, cuda_available: bool, cuda_count: int) -> str:
    """'' / 'cpu' / 'cuda' / 'cuda:N' -> 'cpu' or 'cuda:N'; anything else is a ``ConfigError``."""
    text = (requested or "").strip().lower()
    if text == "":
        return "cuda:0" if cuda_available and cuda_count > 0 else "cpu"
    if text == "cpu":
        return "cpu"
    if text == "cuda" or text.startswith("cuda:"):
        index_text = text.partition(":")[2] or "0"
        if not index_text.isdigit():
            raise ConfigError(f"segmenter.device: {requested!r} is not 'cuda', 'cuda:N' or 'cpu'")
        if not cuda_available or cuda_count == 0:
            raise ConfigError(f"segmenter.device: {requested!r} but this torch sees no CUDA "
                              "device; use 'cpu' or leave it empty")
        index = int(index_text)
        if index >= cuda_count:
            raise ConfigError(f"segmenter.device: {requested!r} but only {cuda_count} CUDA "
                              f"device(s) exist (cuda:0..cuda:{cuda_count - 1})")
        return f"cuda:{index}"
    raise ConfigError(f"segmenter.device: {requested!r} is not 'cuda', 'cuda:N' or 'cpu'")


def resolve_dtype(requested: str, device: str, bf16_supported: bool = True) -> str:
    """'' -> bfloat16 on CUDA, float32 on CPU. CPU accepts float32 only (bf16 does not finish)."""
    text = (requested or "").strip().lower()
    if device == "cpu":
        if text not in ("", "float32"):
            raise ConfigError(f"segmenter.dtype: {requested!r} is not supported on CPU (far too "
                              "slow); use 'float32' or leave it empty")
        return "float32"
    if text == "":
        return "bfloat16" if bf16_supported else "float16"
    if text not in ("bfloat16", "float16", "float32"):
        raise ConfigError(f"segmenter.dtype: {requested!r} is not bfloat16, float16 or float32")
    if text == "bfloat16" and not bf16_supported:
        raise ConfigError(f"segmenter.dtype: bfloat16 is not supported on {device} (pre-Ampere "
                          "GPU, e.g. Jetson Xavier); use 'float16'")
    return text


def memory_report(torch: Any, device: str) -> str:
    parts = []
    try:
        import psutil

        parts.append(f"RSS {psutil.Process().memory_info().rss / 2**30:.2f} GiB")
    except ImportError:
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
        parts.append(f"peak RSS {peak:.2f} GiB")
    if device.startswith("cuda"):
        parts.append(f"CUDA allocated {torch.cuda.memory_allocated(device) / 2**30:.2f} GiB, "
                     f"reserved {torch.cuda.memory_reserved(device) / 2**30:.2f} GiB")
    return ", ".join(parts)


@dataclasses.dataclass
class LoadedSam3:
    """The built model, its processor and where they compute. ``weights_sha256`` (the hash an
    ONNX export is keyed by) is computed on first use, then kept."""

    torch: Any
    model: Any
    processor: Any
    device: str
    dtype: str
    random_weights: bool
    source: str  # the checkpoint path, or "RANDOM weights"
    load_timings: dict[str, float]
    _weights_sha256: str | None = None

    @property
    def on_cuda(self) -> bool:
        return self.device.startswith("cuda")

    @property
    def weights_sha256(self) -> str:
        if self._weights_sha256 is None:
            started = time.perf_counter()
            self._weights_sha256 = weights_hash(self.model)
            log.info("SAM 3 weights hashed in %.1f s: %s", time.perf_counter() - started,
                     self._weights_sha256[:16])
        return self._weights_sha256

    def compute_context(self, autocast: bool = True) -> contextlib.ExitStack:
        """CPU: the device-mapping mode of sam3_compat. CUDA: the device, plus autocast."""
        stack = contextlib.ExitStack()
        if not self.on_cuda:
            from sam3_agent_ros.segmenters.sam3_compat import make_cpu_device_mode

            stack.enter_context(make_cpu_device_mode())
            return stack
        stack.enter_context(self.torch.cuda.device(self.device))
        if autocast and self.dtype != "float32":
            stack.enter_context(self.torch.autocast("cuda", dtype=getattr(self.torch,
                                                                          self.dtype)))
        return stack

    def sync(self) -> None:
        if self.on_cuda:
            self.torch.cuda.synchronize(self.device)

    def release(self) -> None:
        self.model = None
        self.processor = None


def load_sam3(cfg: Any) -> LoadedSam3:
    """Build the model ``cfg`` (a ``SegmenterConfig``) describes, on its device."""
    check_weights_choice(cfg)
    started = time.perf_counter()
    timings: dict[str, float] = {}
    bpe_path = find_bpe(cfg.bpe_path)  # cheap checks first: nothing here needs torch
    checkpoint_path = check_checkpoint_path(cfg.checkpoint) if cfg.checkpoint else None

    import torch

    device = resolve_device(cfg.device, torch.cuda.is_available(),
                            torch.cuda.device_count() if torch.cuda.is_available() else 0)
    on_cuda = device.startswith("cuda")
    # Ampere (compute capability 8) and newer have bf16 (Jetson Orin yes, Xavier no).
    major = torch.cuda.get_device_properties(device).major if on_cuda else 0
    dtype = resolve_dtype(cfg.dtype, device, bf16_supported=major >= 8 or not on_cuda)
    if major >= 8:  # TF32 matmuls, as upstream sets up
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    weights = None
    if not cfg.random_weights:
        if checkpoint_path is None:
            log.info("SAM 3: fetching %s/%s from the Hugging Face hub", HUB_REPO, HUB_FILENAME)
            checkpoint_path = Path(download_checkpoint())
        weights = select_image_weights(read_checkpoint(checkpoint_path), checkpoint_path)
    timings["weights_s"] = time.perf_counter() - started
    build_started = time.perf_counter()
    loaded = LoadedSam3(torch, None, None, device, dtype, bool(cfg.random_weights),
                        "RANDOM weights" if cfg.random_weights else str(checkpoint_path),
                        timings)
    loaded.model, loaded.processor = _build(loaded, cfg, bpe_path, weights, checkpoint_path)
    del weights
    timings["build_s"] = time.perf_counter() - build_started
    return loaded


def _build(loaded: LoadedSam3, cfg: Any, bpe_path: str, weights: dict | None, path: Any):
    torch = loaded.torch
    if not loaded.on_cuda:
        from sam3_agent_ros.segmenters import sam3_compat

        sam3_compat.apply_import_fixes()
    try:
        with warnings.catch_warnings(), loaded.compute_context(autocast=False):
            warnings.simplefilter("ignore")  # sam3's import-time CUDA/autocast warnings
            from sam3.model.sam3_image_processor import Sam3Processor
            from sam3.model_builder import build_sam3_image_model

            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(0)  # reproducible random weights
                model = build_sam3_image_model(bpe_path=bpe_path, device="cpu",
                                               checkpoint_path=None, load_from_HF=False)
                if weights is None:
                    _initialise_empty_parameters(torch, model)
            if weights is not None:
                _load_weights(model, weights, path)
            model = model.eval()
            if loaded.on_cuda:  # the hash costs a host copy once the weights are on a GPU
                loaded._weights_sha256 = weights_hash(model) if cfg.engine != "torch" else None
            model = model.to(loaded.device)
            processor = Sam3Processor(model, resolution=RESOLUTION, device=loaded.device,
                                      confidence_threshold=cfg.confidence_threshold)
    except ImportError as exc:
        raise Sam3LoadError(f"SAM 3 cannot be imported ({exc}): install it as docs/sam3.md "
                            "says (CPU: pip install --no-deps sam3==0.1.4 ...)") from None
    except Sam3LoadError:
        raise
    except Exception as exc:  # noqa: BLE001 - e.g. CUDA OOM while moving the model
        reason = " ".join(str(exc).split())[:200]
        raise Sam3LoadError(f"SAM 3 could not be built on {loaded.device}: "
                            f"{type(exc).__name__}: {reason}") from None
    return model, processor


def _load_weights(model: Any, weights: dict, path: Any) -> None:
    """Copy ``weights`` into ``model``; a file that does not fit is a ``Sam3LoadError``."""
    expected = model.state_dict()
    matched = [key for key in expected if key in weights]
    if len(matched) < len(expected) // 2:
        raise Sam3LoadError(f"SAM 3 checkpoint {path} matches only {len(matched)} of "
                            f"{len(expected)} model weights: it is not the {HUB_FILENAME} of "
                            f"{HUB_REPO} (or sam3 is a different version): download that file")
    wrong_shape = [key for key in matched
                   if tuple(weights[key].shape) != tuple(expected[key].shape)]
    if wrong_shape:
        raise Sam3LoadError(f"SAM 3 checkpoint {path} has {len(wrong_shape)} weights of the wrong "
                            f"shape (e.g. {wrong_shape[0]}): download {HUB_FILENAME} from "
                            f"{HUB_REPO} again")
    missing, _unexpected = model.load_state_dict(weights, strict=False)
    if missing:
        log.warning("SAM 3 checkpoint %s lacks %d model weights (e.g. %s); they stay random",
                    path, len(missing), missing[0])


def _initialise_empty_parameters(torch: Any, model: Any) -> None:
    """sam3 creates a few parameters with ``torch.empty`` (the checkpoint fills them). With random
    weights they would hold garbage (NaN seen): give them small normal values instead."""
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith(("positional_embedding", "text_projection", "level_embed")) \
                    or not torch.isfinite(param).all():
                param.normal_(0.0, 0.02)

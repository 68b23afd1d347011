"""``segmenter.backend: sam3``: Meta's SAM 3 image model behind the ``Segmenter`` interface.

- Loads at construction (fail fast, one-line errors: ``Sam3LoadError`` or ``ConfigError``) and,
  on CUDA, runs one warm-up pass. Importing this module is cheap: torch and sam3 are imported
  inside the constructor.
- Feature reuse: the image backbone runs once per frame. Further ``segment`` calls on the same
  frame (CONTRACTS §3: the same ndarray object for a whole query) only run the text encoder and
  the grounding head. ``backbone_calls`` counts image-backbone passes.
- On CPU the compatibility fixes of ``sam3_compat`` are applied; only float32 is allowed there.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import importlib.util
import logging
import os
import threading
import time
import warnings
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from sam3_agent_ros.config import ConfigError
from sam3_agent_ros.core.errors import SegmenterError
from sam3_agent_ros.segmenters.postprocess import filter_detections

log = logging.getLogger(__name__)

HUB_REPO = "facebook/sam3"
HUB_FILENAME = "sam3.pt"
LICENSE_URL = "https://huggingface.co/facebook/sam3"
BPE_FILENAME = "bpe_simple_vocab_16e6.txt.gz"
BPE_SHA256 = "924691ac288e54409236115652ad4aa250f48203de50a9e4722a6ecd48d6804a"
RESOLUTION = 1008  # the only input resolution sam3 0.1.4 supports
CHECKPOINT_PREFIX = "detector."
WARMUP_PROMPT = "object"


class Sam3LoadError(SegmenterError):
    """SAM 3 could not be loaded; the message is one line naming the fix."""


@dataclass(frozen=True)
class Sam3Result:
    """What ``Sam3Segmenter.segment`` returns (CONTRACTS §3), sorted by descending score."""

    masks: np.ndarray  # (N, H, W) bool
    scores: np.ndarray  # (N,) float64
    boxes: np.ndarray  # (N, 4) float64, x0 y0 x1 y1 pixels
    untrained_weights: bool = False


# --- pure resolution of settings --------------------------------------------------------------


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


def frame_key(image: np.ndarray) -> tuple:
    """Identity of a frame: object id, layout and a cheap fingerprint of 64 rows and 64 columns
    (guards against a recycled id or a buffer refilled in place)."""
    height, width = image.shape[:2]
    rows = image[:: max(1, height // 64)]
    cols = image[:, :: max(1, width // 64)]
    fingerprint = zlib.crc32(np.ascontiguousarray(cols).tobytes(),
                             zlib.crc32(np.ascontiguousarray(rows).tobytes()))
    return (id(image), image.shape, image.dtype.str, fingerprint)


# --- files: BPE vocabulary and checkpoint ---------------------------------------------------


def find_bpe(bpe_path: str) -> str:
    """The BPE vocabulary: ``bpe_path`` or open_clip's byte-identical copy; sha256-verified."""
    if bpe_path:
        path = Path(bpe_path).expanduser()
        source = "segmenter.bpe_path"
    else:
        spec = importlib.util.find_spec("open_clip")  # finds it without importing open_clip
        if spec is None or not spec.submodule_search_locations:
            raise Sam3LoadError("SAM 3 BPE vocabulary not found: pip install open_clip_torch "
                                f"(it ships {BPE_FILENAME}) or set segmenter.bpe_path")
        path = Path(list(spec.submodule_search_locations)[0]) / BPE_FILENAME
        source = "open_clip_torch"
    try:
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as exc:
        raise Sam3LoadError(f"SAM 3 BPE vocabulary {path} ({source}) cannot be read: "
                            f"{exc.strerror or exc}; set segmenter.bpe_path to {BPE_FILENAME}"
                            ) from None
    if digest != BPE_SHA256:
        raise Sam3LoadError(f"SAM 3 BPE vocabulary {path} ({source}) has sha256 {digest[:12]}..., "
                            f"expected {BPE_SHA256[:12]}...: use the original {BPE_FILENAME}")
    return str(path)


def check_checkpoint_path(checkpoint: str) -> Path:
    """Existence and readability of ``segmenter.checkpoint`` (cheap, before anything loads)."""
    path = Path(checkpoint).expanduser()
    if not path.exists():
        raise Sam3LoadError(f"SAM 3 checkpoint {path} does not exist: set segmenter.checkpoint "
                            f"to a downloaded {HUB_FILENAME}, or leave it empty to download "
                            f"{HUB_REPO} from the Hugging Face hub")
    if not path.is_file():
        raise Sam3LoadError(f"SAM 3 checkpoint {path} is not a file: set segmenter.checkpoint to "
                            f"the {HUB_FILENAME} file")
    if not os.access(path, os.R_OK):
        raise Sam3LoadError(f"SAM 3 checkpoint {path} is not readable: fix its permissions")
    return path


def read_checkpoint(path: Path) -> dict:
    """Load a state dict (torch .pt or .safetensors) without building anything."""
    import torch

    if path.suffix == ".safetensors":
        try:
            from safetensors.torch import load_file

            return load_file(str(path))
        except Exception as exc:  # noqa: BLE001 - any parse failure means a bad file
            raise _bad_checkpoint(path, exc) from None
    try:
        try:
            state = torch.load(str(path), map_location="cpu", weights_only=True, mmap=True)
        except RuntimeError:  # not a zip archive: mmap impossible; try the legacy format
            state = torch.load(str(path), map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - unpickling raises many types on garbage
        raise _bad_checkpoint(path, exc) from None
    if isinstance(state, dict) and isinstance(state.get("model"), dict):
        state = state["model"]
    if not isinstance(state, dict):
        raise _bad_checkpoint(path, TypeError(f"holds a {type(state).__name__}, not a state dict"))
    return state


def _bad_checkpoint(path: Path, exc: BaseException) -> Sam3LoadError:
    reason = " ".join(str(exc).split())[:160] or type(exc).__name__
    return Sam3LoadError(f"SAM 3 checkpoint {path} is not a readable checkpoint ({reason}): "
                         f"download {HUB_FILENAME} from {LICENSE_URL} again")


def select_image_weights(state: dict, path: Any) -> dict:
    """The image model's weights: keys ``detector.*`` with the prefix removed (as in sam3.pt)."""
    weights = {key[len(CHECKPOINT_PREFIX):]: value for key, value in state.items()
               if isinstance(key, str) and key.startswith(CHECKPOINT_PREFIX)}
    if not weights:
        example = next((k for k in state if isinstance(k, str)), "none")
        raise Sam3LoadError(f"SAM 3 checkpoint {path} has no '{CHECKPOINT_PREFIX}*' weights "
                            f"(first key: {example!r}); it is not the {HUB_FILENAME} of "
                            f"{HUB_REPO}: download that file")
    return weights


def hub_settings() -> tuple[bool, str | None]:
    """``(offline, cache_dir)`` from ``HF_HUB_OFFLINE`` and ``HF_HUB_CACHE``/``HF_HOME``, read now
    (huggingface_hub reads them only once, at its import)."""
    offline = os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")
    cache_dir = os.environ.get("HF_HUB_CACHE") or (
        str(Path(os.environ["HF_HOME"]) / "hub") if os.environ.get("HF_HOME") else None)
    return offline, cache_dir


def _import_hub():
    try:
        import huggingface_hub
    except ImportError:
        raise Sam3LoadError("huggingface_hub is missing: pip install 'huggingface-hub<2', or set "
                            "segmenter.checkpoint to a local sam3.pt") from None
    return huggingface_hub


def check_hub_weights() -> None:
    """With an empty ``segmenter.checkpoint``: ``sam3.pt`` is in the Hugging Face cache, or it can
    be downloaded (not offline, and a token for the gated repo). Cheap: nothing is downloaded."""
    hub = _import_hub()
    offline, cache_dir = hub_settings()
    cached = hub.try_to_load_from_cache(HUB_REPO, HUB_FILENAME, cache_dir=cache_dir)
    if isinstance(cached, str):
        return
    missing = (f"SAM 3 weights: segmenter.checkpoint is empty and {HUB_REPO} ({HUB_FILENAME}) is "
               "not in the Hugging Face cache")
    if offline:
        raise Sam3LoadError(f"{missing} and HF_HUB_OFFLINE is on: {_fix_offline()} "
                            "(docs/sam3.md)")
    try:
        token = hub.get_token()
    except Exception:  # noqa: BLE001 - e.g. a failed OIDC exchange: the download will tell
        return
    if token is None:
        raise Sam3LoadError(f"{missing} and there is no Hugging Face token to download the gated "
                            f"repo: accept the license at {LICENSE_URL}, run 'hf auth login' "
                            "(or set HF_TOKEN), or set segmenter.checkpoint to a downloaded "
                            f"{HUB_FILENAME} (docs/sam3.md)")


def _fix_offline() -> str:
    return (f"on a connected machine accept the license at {LICENSE_URL}, run 'hf auth login' and "
            f"'hf download {HUB_REPO} {HUB_FILENAME}', then set segmenter.checkpoint to that file")


def _check_weights_choice(cfg: Any) -> None:
    if cfg.random_weights and cfg.checkpoint:
        raise ConfigError("segmenter.random_weights is true but segmenter.checkpoint is set: "
                          "choose one")


def check_loadable(cfg: Any) -> None:
    """What loading SAM 3 needs, checked in milliseconds before anything slow (no torch import):
    torch and sam3 installed, the BPE vocabulary, and weights: ``segmenter.checkpoint`` a readable
    file, or (empty) ``sam3.pt`` cached or downloadable (``check_hub_weights``); none with
    ``segmenter.random_weights``. Raises ``Sam3LoadError`` / ``ConfigError``, one line each."""
    _check_weights_choice(cfg)
    missing = [name for name in ("torch", "sam3") if importlib.util.find_spec(name) is None]
    if missing:
        raise Sam3LoadError(f"SAM 3 needs {' and '.join(missing)}, not installed in this Python: "
                            "install them as docs/sam3.md says")
    find_bpe(cfg.bpe_path)
    if cfg.random_weights:
        return
    if cfg.checkpoint:
        check_checkpoint_path(cfg.checkpoint)
    else:
        check_hub_weights()


def download_checkpoint(cache_dir: str | None = None, offline: bool | None = None) -> str:
    """Fetch ``facebook/sam3``/``sam3.pt`` (or find it in the HF cache); one-line errors.

    ``offline`` and ``cache_dir`` default to ``hub_settings()``."""
    _import_hub()
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
    )

    env_offline, env_cache_dir = hub_settings()
    offline = env_offline if offline is None else offline
    cache_dir = env_cache_dir if cache_dir is None else cache_dir
    fix_offline = _fix_offline()
    try:
        return hf_hub_download(HUB_REPO, HUB_FILENAME, cache_dir=cache_dir,
                               local_files_only=offline)
    except GatedRepoError:
        raise Sam3LoadError(f"SAM 3 weights: access to the gated repo {HUB_REPO} was refused: "
                            f"accept the license at {LICENSE_URL}, then run 'hf auth login'"
                            ) from None
    except RepositoryNotFoundError:
        raise Sam3LoadError(f"SAM 3 weights: the hub refused {HUB_REPO} (not logged in?): accept "
                            f"the license at {LICENSE_URL}, then run 'hf auth login'") from None
    except LocalEntryNotFoundError:
        why = "offline mode (HF_HUB_OFFLINE) is on" if offline else "the hub cannot be reached"
        raise Sam3LoadError(f"SAM 3 weights: {HUB_FILENAME} is not in the Hugging Face cache and "
                            f"{why}: {fix_offline}") from None
    except HfHubHTTPError as exc:
        status = getattr(getattr(exc, "response", None), "status_code", "?")
        raise Sam3LoadError(f"SAM 3 weights: download from {HUB_REPO} failed (HTTP {status}): "
                            f"{fix_offline}") from None
    except OSError as exc:
        raise Sam3LoadError(f"SAM 3 weights: download failed ({exc.strerror or exc}): "
                            f"{fix_offline}") from None


def _memory_report(torch: Any, device: str) -> str:
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


# --- the backend -----------------------------------------------------------------------------


class Sam3Segmenter:
    """SAM 3 with per-frame feature reuse. Thread-safe; ``close()`` frees the model.

    ``warmup``: run one full pass at load; default on CUDA only (on CPU a pass costs 1-2 min
    and gains nothing measurable)."""

    def __init__(self, cfg: Any, *, warmup: bool | None = None):
        self._cfg = cfg
        self._lock = threading.Lock()
        self._state: dict | None = None
        self._frame_key: tuple | None = None
        self._frame_ref: np.ndarray | None = None  # keeps the cached frame's id from recycling
        self.backbone_calls = 0
        self.last_timings: dict[str, float] = {}
        self.load_timings: dict[str, float] = {}
        self._closed = False
        _check_weights_choice(cfg)
        started = time.perf_counter()
        # Cheap checks first: nothing below needs torch until the checkpoint is read.
        bpe_path = find_bpe(cfg.bpe_path)
        checkpoint_path = check_checkpoint_path(cfg.checkpoint) if cfg.checkpoint else None

        import torch

        self._torch = torch
        self.device = resolve_device(cfg.device, torch.cuda.is_available(),
                                     torch.cuda.device_count() if torch.cuda.is_available() else 0)
        self._on_cuda = self.device.startswith("cuda")
        # Ampere (compute capability 8) and newer have bf16 (Jetson Orin yes, Xavier no).
        major = torch.cuda.get_device_properties(self.device).major if self._on_cuda else 0
        self.dtype = resolve_dtype(cfg.dtype, self.device, bf16_supported=major >= 8
                                   or not self._on_cuda)
        if major >= 8:  # TF32 matmuls, as upstream sets up
            torch.backends.cuda.matmul.allow_tf32 = True
            torch.backends.cudnn.allow_tf32 = True

        weights = None
        if not cfg.random_weights:
            if checkpoint_path is None:
                log.info("SAM 3: fetching %s/%s from the Hugging Face hub", HUB_REPO, HUB_FILENAME)
                checkpoint_path = Path(download_checkpoint())
            weights = select_image_weights(read_checkpoint(checkpoint_path), checkpoint_path)
        self.load_timings["weights_s"] = time.perf_counter() - started

        build_started = time.perf_counter()
        self._model, self._processor = self._build(torch, bpe_path, weights, checkpoint_path)
        del weights
        self.load_timings["build_s"] = time.perf_counter() - build_started
        if cfg.random_weights:
            log.warning("!" * 78 + "\nSAM 3 IS RUNNING WITH RANDOM, UNTRAINED WEIGHTS "
                        "(segmenter.random_weights: true). Its masks are MEANINGLESS; every "
                        "result is marked untrained_weights. Use only for tests and "
                        "benchmarks.\n" + "!" * 78)
        if warmup if warmup is not None else self._on_cuda:
            warm_started = time.perf_counter()
            self.segment(np.zeros((RESOLUTION, RESOLUTION, 3), np.uint8), WARMUP_PROMPT)
            self._drop_frame()
            self.backbone_calls = 0
            self.load_timings["warmup_s"] = time.perf_counter() - warm_started
        self.load_timings["total_s"] = time.perf_counter() - started
        log.info("SAM 3 loaded on %s (%s, %s) in %.1f s (%s); %s", self.device, self.dtype,
                 "RANDOM weights" if cfg.random_weights else checkpoint_path,
                 self.load_timings["total_s"],
                 ", ".join(f"{k} {v:.1f}" for k, v in self.load_timings.items() if k != "total_s"),
                 _memory_report(torch, self.device))

    @property
    def untrained_weights(self) -> bool:
        """True when built with ``segmenter.random_weights``: results are meaningless."""
        return bool(self._cfg.random_weights)

    def _build(self, torch: Any, bpe_path: str, weights: dict | None, path: Any):
        if not self._on_cuda:
            from sam3_agent_ros.segmenters import sam3_compat

            sam3_compat.apply_import_fixes()
        try:
            with warnings.catch_warnings(), self._compute_context(autocast=False):
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
                model = model.to(self.device).eval()
                processor = Sam3Processor(model, resolution=RESOLUTION, device=self.device,
                                          confidence_threshold=self._cfg.confidence_threshold)
        except ImportError as exc:
            raise Sam3LoadError(f"SAM 3 cannot be imported ({exc}): install it as docs/sam3.md "
                                "says (CPU: pip install --no-deps sam3==0.1.4 ...)") from None
        except Sam3LoadError:
            raise
        except Exception as exc:  # noqa: BLE001 - e.g. CUDA OOM while moving the model
            reason = " ".join(str(exc).split())[:200]
            raise Sam3LoadError(f"SAM 3 could not be built on {self.device}: "
                                f"{type(exc).__name__}: {reason}") from None
        return model, processor

    def _compute_context(self, autocast: bool = True) -> contextlib.ExitStack:
        """CPU: the device-mapping mode of sam3_compat. CUDA: the device, plus autocast."""
        stack = contextlib.ExitStack()
        torch = self._torch
        if not self._on_cuda:
            from sam3_agent_ros.segmenters.sam3_compat import make_cpu_device_mode

            stack.enter_context(make_cpu_device_mode())
            return stack
        stack.enter_context(torch.cuda.device(self.device))
        if autocast and self.dtype != "float32":
            stack.enter_context(torch.autocast("cuda", dtype=getattr(torch, self.dtype)))
        return stack

    # --- inference -------------------------------------------------------------------------

    def segment(self, image: np.ndarray, text_prompt: str) -> Sam3Result:
        """Segment ``image`` (RGB (H, W, 3) uint8) with a phrase; reuses the frame's features."""
        if not isinstance(image, np.ndarray) or image.ndim != 3 or image.shape[2] != 3 \
                or image.dtype != np.uint8 or image.shape[0] == 0 or image.shape[1] == 0:
            raise SegmenterError("SAM 3 needs an RGB (H, W, 3) uint8 image, got "
                                 f"{getattr(image, 'shape', type(image).__name__)} "
                                 f"{getattr(image, 'dtype', '')}".rstrip())
        if not isinstance(text_prompt, str) or not text_prompt.strip():
            raise SegmenterError("SAM 3 needs a non-empty text prompt")
        torch = self._torch
        with self._lock:
            if self._closed:
                raise SegmenterError("SAM 3 segmenter is closed")
            timings: dict[str, float] = {}
            try:
                with self._compute_context():
                    key = frame_key(image)
                    if key != self._frame_key or self._state is None:
                        self._drop_frame()
                        started = time.perf_counter()
                        chw = torch.from_numpy(np.ascontiguousarray(image)).permute(2, 0, 1)
                        self._state = self._processor.set_image(chw)
                        self._sync()
                        self.backbone_calls += 1
                        self._frame_key, self._frame_ref = key, image
                        timings["backbone_s"] = time.perf_counter() - started
                    started = time.perf_counter()
                    state = self._processor.set_text_prompt(text_prompt.strip(), self._state)
                    masks = state.pop("masks").squeeze(1).cpu().numpy()
                    scores = state.pop("scores").float().cpu().numpy()
                    boxes = state.pop("boxes").float().cpu().numpy()
                    state.pop("masks_logits", None)
                    timings["prompt_s"] = time.perf_counter() - started
            except Exception as exc:  # noqa: BLE001 - torch raises RuntimeError, OOM, ...
                self._drop_frame()
                if self._on_cuda:
                    torch.cuda.empty_cache()
                reason = " ".join(str(exc).split())[:200]
                raise SegmenterError(f"SAM 3 inference failed: {type(exc).__name__}: "
                                     f"{reason}") from None
        cfg = self._cfg
        started = time.perf_counter()
        try:
            kept = filter_detections(masks, scores, boxes,
                                     confidence_threshold=cfg.confidence_threshold,
                                     overlap_threshold=cfg.overlap_threshold,
                                     min_mask_area=cfg.min_mask_area)
        except ValueError as exc:
            raise SegmenterError(f"SAM 3 output is malformed: {exc}") from None
        timings["postprocess_s"] = time.perf_counter() - started
        timings["raw_detections"] = float(len(scores))
        self.last_timings = timings  # for tests and benchmarks: stages of the latest call
        return Sam3Result(kept.masks, kept.scores, kept.boxes, self.untrained_weights)

    def _sync(self) -> None:
        if self._on_cuda:
            self._torch.cuda.synchronize(self.device)

    def _drop_frame(self) -> None:
        self._state = None
        self._frame_key = None
        self._frame_ref = None

    def close(self) -> None:
        """Free the model (and GPU memory). Later ``segment`` calls raise ``SegmenterError``."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._drop_frame()
            self._processor = None
            self._model = None
        gc.collect()
        if self._on_cuda:
            self._torch.cuda.empty_cache()
            log.info("SAM 3 closed; %s", _memory_report(self._torch, self.device))


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

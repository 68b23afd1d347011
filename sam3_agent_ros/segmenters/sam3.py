"""``segmenter.backend: sam3``: Meta's SAM 3 image model behind the ``Segmenter`` interface.

- Loads at construction (fail fast, one-line errors: ``Sam3LoadError`` or ``ConfigError``) and,
  on CUDA, runs one warm-up pass. Importing this module is cheap: torch and sam3 are imported
  inside the constructor.
- Feature reuse: the image backbone runs once per frame. Further ``segment`` calls on the same
  frame (interface §3: the same ndarray object for a whole query) only run the text encoder and
  the grounding head. ``backbone_calls`` counts image-backbone passes.
- ``segment_many`` (standing concepts): several phrases on one frame in one call: one backbone
  pass, one text-encoder pass and one grounding pass batched over the phrases.
- On CPU the compatibility fixes of ``sam3_compat`` are applied; only float32 is allowed there.
- The vocabulary and checkpoint files are found, checked and fetched by ``sam3_files``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import logging
import threading
import time
import warnings
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from sam3_agent_ros.config import ConfigError
from sam3_agent_ros.core.errors import SegmenterError
from sam3_agent_ros.core.ports import Detections
from sam3_agent_ros.segmenters.postprocess import filter_detections
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

log = logging.getLogger(__name__)

RESOLUTION = 1008  # the only input resolution sam3 0.1.4 supports
WARMUP_PROMPT = "object"


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
        self._state: dict[str, Any] | None = None
        self._frame_key: tuple | None = None
        self._frame_ref: np.ndarray | None = None  # keeps the cached frame's id from recycling
        self.backbone_calls = 0
        self.last_timings: dict[str, float] = {}
        self.load_timings: dict[str, float] = {}
        self._closed = False
        check_weights_choice(cfg)
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

    def segment(self, image: np.ndarray, text_prompt: str) -> Detections:
        """Segment ``image`` (RGB (H, W, 3) uint8) with a phrase; reuses the frame's features."""
        return self.segment_many(image, [text_prompt])[0]

    def segment_many(self, image: np.ndarray, text_prompts: list[str]) -> list[Detections]:
        """Segment ``image`` with every phrase: the image backbone at most once (not at all when
        the frame's features are cached), the text encoder once for all phrases, and one batched
        grounding pass (image id 0 for every phrase); one ``Detections`` per phrase, in order."""
        if not isinstance(image, np.ndarray) or image.ndim != 3 or image.shape[2] != 3 \
                or image.dtype != np.uint8 or image.shape[0] == 0 or image.shape[1] == 0:
            raise SegmenterError("SAM 3 needs an RGB (H, W, 3) uint8 image, got "
                                 f"{getattr(image, 'shape', type(image).__name__)} "
                                 f"{getattr(image, 'dtype', '')}".rstrip(),
                                 kind=SegmenterError.BAD_INPUT)
        prompts = list(text_prompts)
        if not prompts or not all(isinstance(p, str) and p.strip() for p in prompts):
            raise SegmenterError("SAM 3 needs non-empty text prompts",
                                 kind=SegmenterError.BAD_INPUT)
        torch = self._torch
        with self._lock:
            if self._closed:
                raise SegmenterError("SAM 3 segmenter is closed", kind=SegmenterError.CLOSED)
            timings: dict[str, float] = {}
            try:
                with self._compute_context(), torch.inference_mode():
                    key = frame_key(image)
                    state = self._state
                    if key != self._frame_key or state is None:
                        self._drop_frame()
                        started = time.perf_counter()
                        chw = torch.from_numpy(np.ascontiguousarray(image)).permute(2, 0, 1)
                        state = self._state = self._processor.set_image(chw)
                        self._sync()
                        self.backbone_calls += 1
                        self._frame_key, self._frame_ref = key, image
                        timings["backbone_s"] = time.perf_counter() - started
                    started = time.perf_counter()
                    raw = self._ground(state, [p.strip() for p in prompts], image.shape[:2])
                    timings["prompt_s"] = time.perf_counter() - started
            except Exception as exc:  # noqa: BLE001 - torch raises RuntimeError, OOM, ...
                self._drop_frame()
                if self._on_cuda:
                    torch.cuda.empty_cache()
                reason = " ".join(str(exc).split())[:200]
                raise SegmenterError(f"SAM 3 inference failed: {type(exc).__name__}: "
                                     f"{reason}", kind=SegmenterError.INFERENCE) from None
        cfg = self._cfg
        started = time.perf_counter()
        found = []
        try:
            for masks, scores, boxes in raw:
                kept = filter_detections(masks, scores, boxes,
                                         confidence_threshold=cfg.confidence_threshold,
                                         overlap_threshold=cfg.overlap_threshold,
                                         min_mask_area=cfg.min_mask_area)
                found.append(dataclasses.replace(kept, untrained_weights=self.untrained_weights))
        except ValueError as exc:
            raise SegmenterError(f"SAM 3 output is malformed: {exc}",
                                 kind=SegmenterError.MALFORMED) from None
        timings["postprocess_s"] = time.perf_counter() - started
        timings["raw_detections"] = float(sum(len(r[1]) for r in raw))
        timings["prompts"] = float(len(prompts))
        self.last_timings = timings  # for tests and benchmarks: stages of the latest call
        return found

    def _ground(self, state: dict[str, Any], prompts: list[str], size: tuple[int, int]
                ) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """The grounding head for every phrase on the cached frame features, batched: one
        (masks, scores, boxes) triple per phrase, kept where score > the confidence threshold
        (score: the query's probability times the phrase's presence probability; boxes x0 y0 x1
        y1 in pixels; masks: the upsampled mask logits > 0, at the frame's size)."""
        from sam3.model.box_ops import box_cxcywh_to_xyxy
        from sam3.model.data_misc import FindStage, interpolate

        torch, model = self._torch, self._model
        count = len(prompts)
        features = dict(state["backbone_out"])  # the cached frame's features stay as they are
        features.update(model.backbone.forward_text(prompts, device=self.device))
        ids = torch.arange(count, device=self.device, dtype=torch.long)
        find = FindStage(img_ids=torch.zeros_like(ids), text_ids=ids, input_boxes=None,
                         input_boxes_mask=None, input_boxes_label=None, input_points=None,
                         input_points_mask=None)
        out = model.forward_grounding(backbone_out=features, find_input=find,
                                      geometric_prompt=model._get_dummy_prompt(count),
                                      find_target=None)
        presence = out["presence_logit_dec"].sigmoid().unsqueeze(1)  # (k, 1, 1)
        probabilities = (out["pred_logits"].sigmoid() * presence).squeeze(-1)  # (k, queries)
        height, width = size
        scale = torch.tensor([width, height, width, height], device=self.device)
        results = []
        for index in range(count):
            keep = probabilities[index] > self._cfg.confidence_threshold
            boxes = box_cxcywh_to_xyxy(out["pred_boxes"][index][keep]) * scale
            logits = interpolate(out["pred_masks"][index][keep].unsqueeze(1), (height, width),
                                 mode="bilinear", align_corners=False)
            results.append((logits.squeeze(1).sigmoid().gt(0.5).cpu().numpy(),
                            probabilities[index][keep].float().cpu().numpy(),
                            boxes.float().cpu().numpy()))
        return results

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

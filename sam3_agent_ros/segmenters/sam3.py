"""``segmenter.backend: sam3``: Meta's SAM 3 image model behind the ``Segmenter`` interface.

- Loads at construction (fail fast, one-line errors: ``Sam3LoadError`` or ``ConfigError``;
  ``sam3_model``) and, on CUDA, runs one warm-up pass. Importing this module is cheap: torch
  and sam3 are imported inside the constructor.
- ``segmenter.engine`` picks what runs the stages (``sam3_engine``): eager torch, or ONNX
  Runtime for the parts that export (the image and text encoders), the rest in torch.
- Feature reuse: the image encoder runs once per frame. Further ``segment`` calls on the same
  frame (interface §3: the same ndarray object for a whole query) only run the text encoder and
  the grounding. ``backbone_calls`` counts image-encoder passes, on either engine.
- ``segment_many`` (standing concepts): several phrases on one frame in one call: one image
  pass, one text-encoder pass and one grounding pass batched over the phrases.
"""

from __future__ import annotations

import dataclasses
import gc
import logging
import threading
import time
import zlib
from typing import Any

import numpy as np

from sam3_agent_ros.core.errors import SegmenterError
from sam3_agent_ros.core.ports import Detections
from sam3_agent_ros.segmenters.postprocess import filter_detections
from sam3_agent_ros.segmenters.sam3_engine import TorchEngine, make_engine
from sam3_agent_ros.segmenters.sam3_model import (  # noqa: F401 - re-exported for callers
    LoadedSam3,
    load_sam3,
    memory_report,
    resolve_device,
    resolve_dtype,
)
from sam3_agent_ros.segmenters.sam3_onnx_parts import RESOLUTION

log = logging.getLogger(__name__)

WARMUP_PROMPT = "object"


def frame_key(image: np.ndarray) -> tuple:
    """Identity of a frame: object id, layout and a cheap fingerprint of 64 rows and 64 columns
    (guards against a recycled id or a buffer refilled in place)."""
    height, width = image.shape[:2]
    rows = image[:: max(1, height // 64)]
    cols = image[:, :: max(1, width // 64)]
    fingerprint = zlib.crc32(np.ascontiguousarray(cols).tobytes(),
                             zlib.crc32(np.ascontiguousarray(rows).tobytes()))
    return (id(image), image.shape, image.dtype.str, fingerprint)


# --- the backend -----------------------------------------------------------------------------


class Sam3Segmenter:
    """SAM 3 with per-frame feature reuse. Thread-safe; ``close()`` frees the model.

    ``warmup``: run one full pass at load; default on CUDA only (on CPU a pass costs 1-2 min
    and gains nothing measurable). ``loaded``: a model built by ``load_sam3`` to share (e.g. a
    torch and an onnxruntime segmenter side by side in a benchmark or a test); ``close`` then
    leaves it loaded for its owner, and an onnxruntime engine keeps the torch weights of the
    parts it runs (without ``loaded`` it frees them: ~3 GiB less)."""

    def __init__(self, cfg: Any, *, warmup: bool | None = None,
                 loaded: LoadedSam3 | None = None):
        self._cfg = cfg
        self._lock = threading.Lock()
        self._state: dict[str, Any] | None = None
        self._frame_key: tuple | None = None
        self._frame_ref: np.ndarray | None = None  # keeps the cached frame's id from recycling
        self.backbone_calls = 0
        self.last_timings: dict[str, float] = {}
        self._closed = False
        self._owns_model = loaded is None
        started = time.perf_counter()
        self._loaded = loaded = loaded or load_sam3(cfg)
        self._torch = loaded.torch
        self.device, self.dtype = loaded.device, loaded.dtype
        self._on_cuda = loaded.on_cuda
        self.load_timings: dict[str, float] = dict(loaded.load_timings)
        if cfg.random_weights:
            log.warning("!" * 78 + "\nSAM 3 IS RUNNING WITH RANDOM, UNTRAINED WEIGHTS "
                        "(segmenter.random_weights: true). Its masks are MEANINGLESS; every "
                        "result is marked untrained_weights. Use only for tests and "
                        "benchmarks.\n" + "!" * 78)
        engine_started = time.perf_counter()
        try:
            self._engine: TorchEngine = make_engine(loaded, cfg, shared=not self._owns_model)
        except BaseException:
            if self._owns_model:
                loaded.release()
            raise
        self.load_timings["engine_s"] = time.perf_counter() - engine_started
        if warmup if warmup is not None else self._on_cuda:
            warm_started = time.perf_counter()
            self.segment(np.zeros((RESOLUTION, RESOLUTION, 3), np.uint8), WARMUP_PROMPT)
            self._drop_frame()
            self.backbone_calls = 0
            self.load_timings["warmup_s"] = time.perf_counter() - warm_started
        self.load_timings["total_s"] = time.perf_counter() - started
        log.info("SAM 3 loaded on %s (%s, %s; %s) in %.1f s (%s); %s", self.device, self.dtype,
                 loaded.source, ", ".join(f"{k} {v}" for k, v in self.engine_info.items()),
                 self.load_timings["total_s"],
                 ", ".join(f"{k} {v:.1f}" for k, v in self.load_timings.items() if k != "total_s"),
                 memory_report(loaded.torch, self.device))

    @property
    def untrained_weights(self) -> bool:
        """True when built with ``segmenter.random_weights``: results are meaningless."""
        return bool(self._cfg.random_weights)

    @property
    def engine_info(self) -> dict[str, str]:
        """What runs SAM 3, for the result's ``backends``: ``segmenter_engine`` (torch |
        onnxruntime) and, for onnxruntime, the providers really used and the parts on each."""
        return self._engine.describe()

    @property
    def loaded(self) -> LoadedSam3:
        return self._loaded

    def _compute_context(self, autocast: bool = True) -> Any:
        return self._loaded.compute_context(autocast)

    # --- inference -------------------------------------------------------------------------

    def segment(self, image: np.ndarray, text_prompt: str) -> Detections:
        """Segment ``image`` (RGB (H, W, 3) uint8) with a phrase; reuses the frame's features."""
        return self.segment_many(image, [text_prompt])[0]

    def segment_many(self, image: np.ndarray, text_prompts: list[str]) -> list[Detections]:
        """Segment ``image`` with every phrase: the image encoder at most once (not at all when
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
                        state = self._state = self._engine.encode_image(chw)
                        self._loaded.sync()
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
        """The text encoder and the grounding for every phrase on the cached frame features,
        batched: one (masks, scores, boxes) triple per phrase, kept where score > the confidence
        threshold (score: the query's probability times the phrase's presence probability;
        boxes x0 y0 x1 y1 in pixels; masks: the upsampled mask logits > 0, at the frame's
        size)."""
        from sam3.model.box_ops import box_cxcywh_to_xyxy
        from sam3.model.data_misc import interpolate

        torch, device = self._torch, self.device
        text = self._engine.encode_text(prompts)
        logits, boxes, masks, presence = self._engine.ground(state, text)
        probabilities = (logits.sigmoid() * presence.sigmoid().unsqueeze(1)).squeeze(-1)
        height, width = size
        scale = torch.tensor([width, height, width, height], device=device)
        results = []
        for index in range(len(prompts)):
            keep = probabilities[index] > self._cfg.confidence_threshold
            kept_boxes = box_cxcywh_to_xyxy(boxes[index][keep]) * scale
            upsampled = interpolate(masks[index][keep].unsqueeze(1), (height, width),
                                    mode="bilinear", align_corners=False)
            results.append((upsampled.squeeze(1).sigmoid().gt(0.5).cpu().numpy(),
                            probabilities[index][keep].float().cpu().numpy(),
                            kept_boxes.float().cpu().numpy()))
        return results

    def _drop_frame(self) -> None:
        self._state = None
        self._frame_key = None
        self._frame_ref = None

    def close(self) -> None:
        """Free the model (and GPU memory) unless it was shared in (``loaded``). Later
        ``segment`` calls raise ``SegmenterError``."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._drop_frame()
            self._engine.close()
            if self._owns_model:
                self._loaded.release()
        gc.collect()
        if self._on_cuda:
            self._torch.cuda.empty_cache()
            log.info("SAM 3 closed; %s", memory_report(self._torch, self.device))

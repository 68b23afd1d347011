"""The engines that run SAM 3's three stages behind one interface (``segmenter.engine``).

A stage is what ``Sam3Segmenter`` calls: ``encode_image`` (the uint8 frame -> the image
features, once per frame), ``encode_text`` (phrases -> text features) and ``ground`` (one
frame's features and the phrases' text features -> query logits, boxes, mask logits, presence).

- ``TorchEngine``: sam3's own modules, eagerly.
- ``OrtEngine``: the exported parts (``sam3_onnx_parts``: the image and text encoders) through
  ONNX Runtime; the grounding (``in_torch`` in the manifest, with the exporter's reason) runs in
  torch exactly as ``TorchEngine`` runs it. The sessions' providers are the ones really used.

``open_engine_dir`` finds or makes the export: ``segmenter.engine_dir`` when set (a manifest that
does not fit the weights is refused with the reason), else the cache folder of the weights'
hash, exported there on first use.
"""

from __future__ import annotations

import contextlib
import gc
import logging
from pathlib import Path
from typing import Any

from sam3_agent_ros.segmenters.engine_manifest import (
    ManifestError,
    default_engine_dir,
    manifest_problem,
    read_manifest,
)
from sam3_agent_ros.segmenters.sam3_files import Sam3LoadError
from sam3_agent_ros.segmenters.sam3_model import LoadedSam3
from sam3_agent_ros.segmenters.sam3_onnx_parts import (
    CONTEXT_LENGTH,
    GROUNDING,
    IMAGE_ENCODER,
    PARTS,
    TEXT_ENCODER,
    build_adapter,
    drop_torch_modules,
    example_inputs,
    run_grounding,
)

log = logging.getLogger(__name__)

# What export_engine exports. The grounding (fusion encoder, decoder, heads) does not go through
# torch.export (torch 2.13, sam3 0.1.4): it stays in torch, and the manifest says why.
EXPORTED_PARTS = ("image_encoder", "text_encoder")
GROUNDING_IN_TORCH = (
    "torch.export cannot trace sam3's decoder: TransformerDecoder._get_rpb_matrix (the box "
    "relative-position bias, sam3/model/decoder.py) takes the feature map's height and width "
    "from the encoder's spatial_shapes tensor and branches on them (its coordinate cache), a "
    "data-dependent guard (GuardOnDataDependentSymNode) the exporter refuses")
# The parts an export may hold (their names, inputs and outputs); the grounding runs in torch.
EXPECTED = {name: (PARTS[name].inputs, PARTS[name].outputs) for name in EXPORTED_PARTS}


class TorchEngine:
    """SAM 3's stages in eager torch on the loaded model's device."""

    name = "torch"

    def __init__(self, loaded: LoadedSam3):
        self.loaded = loaded

    def encode_image(self, chw: Any) -> dict[str, Any]:
        return self.loaded.processor.set_image(chw)["backbone_out"]

    def encode_text(self, prompts: list[str]) -> dict[str, Any]:
        return self.loaded.model.backbone.forward_text(prompts, device=self.loaded.device)

    def ground(self, image: dict[str, Any], text: dict[str, Any]) -> tuple:
        return run_grounding(self.loaded.model, image["backbone_fpn"], image["vision_pos_enc"],
                             text["language_features"], text["language_mask"])

    def describe(self) -> dict[str, str]:
        return {"segmenter_engine": "torch"}

    def close(self) -> None:
        pass


class OrtEngine(TorchEngine):
    """The exported parts in ``folder`` through ONNX Runtime, the rest in torch."""

    name = "onnxruntime"

    def __init__(self, loaded: LoadedSam3, folder: Path, manifest: dict, threads: int = 0,
                 free_torch_parts: bool = False):
        """``free_torch_parts``: once the sessions exist, free the torch weights of the parts
        they run (only for a model no other engine shares)."""
        super().__init__(loaded)
        from sam3_agent_ros.segmenters.ort_sessions import PartSession

        self.folder = folder
        self.manifest = manifest
        fp16 = manifest["dtype"] == "float16"
        trt_cache = folder / "tensorrt"  # TensorRT's engines, built on first use (minutes)
        with contextlib.suppress(OSError):  # a read-only export: TensorRT rebuilds each start
            trt_cache.mkdir(exist_ok=True)
        self.sessions = {name: PartSession(folder / part["file"], loaded.device, fp16=fp16,
                                           threads=threads, trt_cache_dir=str(trt_cache))
                         for name, part in manifest["parts"].items()}
        self.in_torch = {name: manifest.get("in_torch", {}).get(name, "not exported")
                         for name in PARTS if name not in self.sessions}
        if free_torch_parts:
            drop_torch_modules(loaded.model, list(self.sessions))
            release_free_memory()

    @property
    def providers(self) -> list[str]:
        """The providers in use, best first (the union over the parts' sessions)."""
        seen: list[str] = []
        for session in self.sessions.values():
            seen += [p for p in session.providers if p not in seen]
        return seen

    def encode_image(self, chw: Any) -> dict[str, Any]:
        session = self.sessions.get(IMAGE_ENCODER.name)
        if session is None:
            return super().encode_image(chw)
        device = self.loaded.device
        image = self.loaded.processor.transform(chw.to(device)).unsqueeze(0)
        outputs = [t.to(device) for t in session.run(image.float())]
        features, positions = outputs[:3], outputs[3:]
        return {"vision_features": features[-1], "vision_pos_enc": positions,
                "backbone_fpn": features, "sam2_backbone_out": None}

    def encode_text(self, prompts: list[str]) -> dict[str, Any]:
        session = self.sessions.get(TEXT_ENCODER.name)
        if session is None:
            return super().encode_text(prompts)
        device = self.loaded.device
        tokenizer = self.loaded.model.backbone.language_backbone.tokenizer
        tokens = tokenizer(prompts, context_length=CONTEXT_LENGTH)
        (features,) = session.run(tokens)
        # sam3's mask convention: True where a token is padding
        return {"language_features": features.to(device),
                "language_mask": (tokens == 0).to(device)}

    def describe(self) -> dict[str, str]:
        return {"segmenter_engine": "onnxruntime",
                "segmenter_providers": ",".join(self.providers),
                "segmenter_onnx_parts": ",".join(self.sessions),
                "segmenter_torch_parts": ",".join(self.in_torch)}

    def close(self) -> None:
        self.sessions = {}


def release_free_memory() -> None:
    """Collect garbage, then hand the free heap back to the OS (glibc ``malloc_trim``): the
    freed weights are many mid-sized blocks that glibc would otherwise keep."""
    import ctypes

    gc.collect()
    with contextlib.suppress(OSError, AttributeError):  # not glibc: its own policy applies
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def export_plan(loaded: LoadedSam3, names: tuple[str, ...] = EXPORTED_PARTS) -> list:
    """The ``PartExport`` list of ``names`` for ``engine_export.export_parts``."""
    from sam3_agent_ros.segmenters.engine_export import PartExport

    plan = []
    for name in names:
        inputs = example_inputs(name, loaded.model, count=2 if name == TEXT_ENCODER.name else 1)
        dynamic = None
        if name == TEXT_ENCODER.name:  # any number of phrases in one pass
            from torch.export import Dim

            dynamic = {"tokens": {0: Dim("prompts", min=1, max=256)}}
        plan.append(PartExport(PARTS[name], build_adapter(name, loaded.model), inputs, dynamic))
    return plan


def export_engine(loaded: LoadedSam3, folder: Path, dtype: str = "float32",
                  names: tuple[str, ...] = EXPORTED_PARTS):
    """Export ``loaded``'s parts ``names`` into ``folder``; the ``ExportReport``. The model is
    traced in float32 (autocast off; an fp16 export converts the traced graph), on the device
    it is on."""
    from sam3_agent_ros.segmenters.engine_export import export_parts

    plan = export_plan(loaded, names)
    return export_parts(plan, folder, dtype=dtype, weights_sha256=loaded.weights_sha256,
                        context=lambda: loaded.compute_context(autocast=False),
                        kept_in_torch={n: GROUNDING_IN_TORCH for n in PARTS
                                       if n == GROUNDING.name and n not in names},
                        extra={"resolution": 1008, "random_weights": loaded.random_weights,
                               "source": loaded.source})


def open_engine_dir(loaded: LoadedSam3, engine_dir: str, dtype: str,
                    export: Any = None) -> tuple[Path, dict]:
    """(folder, manifest) of the export to run. ``engine_dir`` set: its manifest must fit
    (``Sam3LoadError`` with the reason otherwise, never a fresh export over the user's files).
    Empty: the cache folder of the weights' hash; an export there that is missing, unfinished,
    stale or of another dtype is (re)made by ``export(folder, dtype)``."""
    if engine_dir:
        folder = Path(engine_dir).expanduser()
        try:
            manifest = read_manifest(folder)
        except ManifestError as exc:
            raise Sam3LoadError(f"segmenter.engine_dir: {exc}; make one with sam3-agent "
                                f"export-engine --out {folder}") from None
        problem = manifest_problem(manifest, folder, loaded.weights_sha256, EXPECTED)
        if problem:
            raise Sam3LoadError(f"segmenter.engine_dir {folder} is refused: {problem}; export "
                                "it again from these weights (sam3-agent export-engine), or "
                                "leave segmenter.engine_dir empty")
        return folder, manifest
    folder = default_engine_dir(loaded.weights_sha256)
    try:
        manifest = read_manifest(folder)
        problem = manifest_problem(manifest, folder, loaded.weights_sha256, EXPECTED)
        if problem is None and manifest.get("dtype") != dtype:
            problem = f"it is {manifest.get('dtype')}, {dtype} is wanted"
    except ManifestError as exc:
        problem = str(exc)
    if problem is None:
        return folder, manifest
    if export is None:
        raise Sam3LoadError(f"no usable ONNX export in {folder}: {problem}")
    log.warning("SAM 3 ONNX export in %s: %s; exporting now (minutes on a CPU)",
                folder, problem)
    report = export(folder, dtype)
    log.info("SAM 3 ONNX export: %s", report.summary())
    return folder, report.manifest


def make_engine(loaded: LoadedSam3, cfg: Any, shared: bool = False) -> TorchEngine:
    """The engine ``cfg.engine`` names on ``loaded``; ``shared``: another engine may use the
    model too (the exported parts' torch weights are then kept)."""
    if cfg.engine == "torch":
        return TorchEngine(loaded)
    from sam3_agent_ros.segmenters.ort_sessions import import_onnxruntime

    import_onnxruntime()  # a clear error before minutes of export
    dtype = "float16" if loaded.on_cuda and loaded.dtype != "float32" else "float32"

    def export_here(folder: Path, wanted: str):
        try:
            return export_engine(loaded, folder, wanted)
        except Exception as exc:  # noqa: BLE001 - no part exported, a full disk, ...
            reason = " ".join(str(exc).split())[:300]
            raise Sam3LoadError(f"SAM 3 ONNX export into {folder} failed ({type(exc).__name__}: "
                                f"{reason}): export on a PC with sam3-agent export-engine --out "
                                f"DIR --dtype {wanted} -p segmenter.device:=cpu and set "
                                "segmenter.engine_dir to DIR") from None

    folder, manifest = open_engine_dir(loaded, cfg.engine_dir, dtype, export_here)
    return OrtEngine(loaded, folder, manifest, free_torch_parts=not shared)

"""The parts of SAM 3 that ONNX export takes, as tensor-in / tensor-out torch modules.

sam3's own modules take and return dicts, dataclasses and Python strings, which an ONNX graph
cannot hold. Each adapter here wraps one part of the loaded model (sharing its weights, copying
nothing) with a fixed list of named tensor inputs and outputs:

- ``ImageEncoder``: ``model.backbone.vision_backbone`` (the ViT and its ``Sam3DualViTDetNeck``)
  on the normalised 1x3x1008x1008 image, with the backbone's ``scalp`` applied: the three feature
  maps the grounding uses (256 x 288/144/72 squared) and their position encodings.
- ``TextEncoder``: the text transformer and its resizer on token ids (the BPE tokenizer is Python
  and stays in torch): the per-token features the grounding reads (sequence first).
- ``Grounding``: the fusion encoder, the decoder, the scoring and box heads and the segmentation
  head (``model.forward_grounding``) for one phrase on one frame's features.

``PARTS`` names them; the engine (``sam3_engine``) decides which to export and run. Importing this
module is cheap (torch is imported inside the functions that build an adapter).
"""

from __future__ import annotations

import dataclasses
from typing import Any

RESOLUTION = 1008  # the only input resolution sam3 0.1.4 supports
CONTEXT_LENGTH = 32  # the text encoder's token count (sam3's VETextEncoder)
FEATURE_NAMES = ("feature_0", "feature_1", "feature_2")
POSITION_NAMES = ("position_0", "position_1", "position_2")


@dataclasses.dataclass(frozen=True)
class PartSpec:
    """One exportable part: its file stem, its named inputs and outputs."""

    name: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]


IMAGE_ENCODER = PartSpec("image_encoder", ("image",), FEATURE_NAMES + POSITION_NAMES)
TEXT_ENCODER = PartSpec("text_encoder", ("tokens",), ("text_features",))
GROUNDING = PartSpec("grounding",
                     FEATURE_NAMES + POSITION_NAMES + ("text_features", "text_mask"),
                     ("pred_logits", "pred_boxes", "pred_masks", "presence_logit"))
PARTS = {spec.name: spec for spec in (IMAGE_ENCODER, TEXT_ENCODER, GROUNDING)}


def build_adapter(name: str, model: Any) -> Any:
    """The torch adapter of part ``name`` around the loaded sam3 image ``model``."""
    import torch

    class ImageEncoder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.vision = model.backbone.vision_backbone
            self.scalp = int(model.backbone.scalp)

        def forward(self, image):
            features, positions, _, _ = self.vision(image)
            if self.scalp > 0:
                features, positions = features[: -self.scalp], positions[: -self.scalp]
            return (*features, *positions)

    class TextEncoder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            language = model.backbone.language_backbone
            self.transformer = language.encoder
            self.resizer = language.resizer

        def forward(self, tokens):
            _, memory = self.transformer(tokens)
            return self.resizer(memory.transpose(0, 1))  # sequence first, as forward_text

    class Grounding(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, f0, f1, f2, p0, p1, p2, text_features, text_mask):
            return run_grounding(self.model, [f0, f1, f2], [p0, p1, p2], text_features,
                                 text_mask)

    adapters = {"image_encoder": ImageEncoder, "text_encoder": TextEncoder,
                "grounding": Grounding}
    return adapters[name]().eval()


def drop_torch_modules(model: Any, names: list[str]) -> None:
    """Free the torch weights of the parts ``names`` (those ONNX Runtime now runs): their modules
    become stand-ins that refuse to run. Saves ~1.7 GiB (image encoder) + ~1.3 GiB (text
    encoder) of float32 weights held twice otherwise. The tokenizer stays."""
    import torch

    class RunsInOnnxRuntime(torch.nn.Module):
        def __init__(self, part: str) -> None:
            super().__init__()
            self.part = part

        def forward(self, *args: Any, **kwargs: Any) -> Any:
            raise RuntimeError(f"SAM 3's {self.part} runs in ONNX Runtime here: its torch "
                               "weights were freed")

    if IMAGE_ENCODER.name in names:
        model.backbone.vision_backbone = RunsInOnnxRuntime("image encoder")
    if TEXT_ENCODER.name in names:
        language = model.backbone.language_backbone
        language.encoder = RunsInOnnxRuntime("text encoder")
        language.resizer = RunsInOnnxRuntime("text encoder")


def run_grounding(model: Any, features: list, positions: list, text_features: Any,
                  text_mask: Any) -> tuple:
    """sam3's grounding for ``k`` phrases on one frame: (pred_logits (k, Q, 1), pred_boxes
    (k, Q, 4) cx cy w h in [0, 1], pred_masks (k, Q, 288, 288) logits, presence_logit (k, 1)).
    ``text_features`` (32, k, 256) and ``text_mask`` (k, 32, True = padding) as forward_text
    gives them. The torch engine and the exported ``Grounding`` both run this."""
    import torch
    from sam3.model.data_misc import FindStage

    count = text_features.shape[1]
    ids = torch.arange(count, device=text_features.device, dtype=torch.long)
    find = FindStage(img_ids=torch.zeros_like(ids), text_ids=ids, input_boxes=None,
                     input_boxes_mask=None, input_boxes_label=None, input_points=None,
                     input_points_mask=None)
    backbone_out = {"vision_features": features[-1], "vision_pos_enc": list(positions),
                    "backbone_fpn": list(features), "sam2_backbone_out": None,
                    "language_features": text_features, "language_mask": text_mask}
    out = model.forward_grounding(backbone_out=backbone_out, find_input=find,
                                  geometric_prompt=model._get_dummy_prompt(count),
                                  find_target=None)
    return (out["pred_logits"], out["pred_boxes"], out["pred_masks"],
            out["presence_logit_dec"])


def example_inputs(name: str, model: Any, count: int = 1) -> tuple:
    """Inputs of the right shapes and types to trace part ``name`` with (``count`` phrases)."""
    import torch

    if name == "image_encoder":
        return (torch.zeros(1, 3, RESOLUTION, RESOLUTION),)
    if name == "text_encoder":
        return (torch.ones(count, CONTEXT_LENGTH, dtype=torch.long),)
    sizes = (RESOLUTION // 14 * 4, RESOLUTION // 14 * 2, RESOLUTION // 14)
    features = tuple(torch.zeros(1, 256, s, s) for s in sizes)
    text_mask = torch.ones(count, CONTEXT_LENGTH, dtype=torch.bool)
    text_mask[:, :4] = False
    return (*features, *features, torch.zeros(CONTEXT_LENGTH, count, 256), text_mask)

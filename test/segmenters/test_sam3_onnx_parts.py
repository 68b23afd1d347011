"""The exportable parts' names, and freeing the torch weights ONNX Runtime has taken over."""

from __future__ import annotations

import types

import pytest

from sam3_agent_ros.segmenters.sam3_onnx_parts import (
    GROUNDING,
    IMAGE_ENCODER,
    PARTS,
    TEXT_ENCODER,
    drop_torch_modules,
)


def test_the_parts_hand_each_other_what_they_name():
    assert set(PARTS) == {"image_encoder", "text_encoder", "grounding"}
    # the grounding reads the image encoder's outputs and the text encoder's features
    assert GROUNDING.inputs[:6] == IMAGE_ENCODER.outputs
    assert "text_features" in GROUNDING.inputs and TEXT_ENCODER.outputs == ("text_features",)


def test_freed_parts_refuse_to_run_and_the_tokenizer_stays():
    torch = pytest.importorskip("torch")
    tokenizer = object()
    language = torch.nn.Module()
    language.encoder, language.resizer = torch.nn.Linear(4, 4), torch.nn.Linear(4, 2)
    language.tokenizer = tokenizer
    backbone = torch.nn.Module()
    backbone.vision_backbone, backbone.language_backbone = torch.nn.Linear(8, 8), language
    model = types.SimpleNamespace(backbone=backbone)

    drop_torch_modules(model, ["image_encoder"])
    assert sum(p.numel() for p in backbone.vision_backbone.parameters()) == 0
    with pytest.raises(RuntimeError, match="image encoder runs in ONNX Runtime"):
        backbone.vision_backbone(torch.zeros(1, 8))
    assert isinstance(language.encoder, torch.nn.Linear)  # not asked: kept

    drop_torch_modules(model, ["text_encoder"])
    assert sum(p.numel() for p in language.parameters()) == 0
    assert language.tokenizer is tokenizer

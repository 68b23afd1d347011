"""SAM 3 load failures through the backend's constructor: each is a one-line, actionable error
raised before the model is built (the file checks themselves: test_sam3_files.py)."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import numpy as np
import pytest

from sam3_agent_ros.config import ConfigError, SegmenterConfig
from sam3_agent_ros.segmenters.sam3 import Sam3Segmenter, frame_key, resolve_device, resolve_dtype
from sam3_agent_ros.segmenters.sam3_files import LICENSE_URL, Sam3LoadError


def config(**changes) -> SegmenterConfig:
    return dataclasses.replace(SegmenterConfig(), backend="sam3", **changes)


def load_error(cfg: SegmenterConfig, kind=Sam3LoadError) -> str:
    with pytest.raises(kind) as info:
        Sam3Segmenter(cfg)
    message = str(info.value)
    assert "\n" not in message, message
    return message


def test_missing_checkpoint_names_the_path_and_the_parameter(tmp_path):
    message = load_error(config(checkpoint=str(tmp_path / "nowhere" / "sam3.pt")))
    assert str(tmp_path / "nowhere" / "sam3.pt") in message
    assert "segmenter.checkpoint" in message and "does not exist" in message


def test_checkpoint_that_is_a_directory(tmp_path):
    assert "is not a file" in load_error(config(checkpoint=str(tmp_path)))


@pytest.mark.parametrize("name", ["sam3.pt", "sam3.safetensors"])
def test_garbage_checkpoint_is_not_readable(tmp_path, name):
    path = tmp_path / name
    path.write_bytes(b"this is not a checkpoint\x00\x01" * 100)
    message = load_error(config(checkpoint=str(path)))
    assert "is not a readable checkpoint" in message and str(path) in message
    assert LICENSE_URL in message


def test_checkpoint_with_foreign_keys_is_rejected(tmp_path):
    import torch

    path = tmp_path / "other.pt"
    torch.save({"model": {"encoder.layer.weight": torch.zeros(2)}}, path)
    message = load_error(config(checkpoint=str(path)))
    assert "has no 'detector.*' weights" in message and "encoder.layer.weight" in message


def test_checkpoint_holding_no_state_dict(tmp_path):
    import torch

    path = tmp_path / "list.pt"
    torch.save([1, 2, 3], path)
    assert "not a state dict" in load_error(config(checkpoint=str(path)))


def test_offline_hub_with_empty_cache_says_how_to_get_the_weights(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    message = load_error(config(checkpoint=""))
    assert "offline" in message and "hf auth login" in message and LICENSE_URL in message
    assert "segmenter.checkpoint" in message


def test_wrong_bpe_file_fails_the_sha256_check(tmp_path):
    bpe = tmp_path / "vocab.txt.gz"
    bpe.write_bytes(b"not the vocabulary")
    message = load_error(config(random_weights=True, bpe_path=str(bpe)))
    assert "sha256" in message and str(bpe) in message
    assert "cannot be read" in load_error(config(random_weights=True,
                                                 bpe_path=str(tmp_path / "none.gz")))


def test_random_weights_and_a_checkpoint_conflict(tmp_path):
    message = load_error(config(random_weights=True, checkpoint=str(tmp_path / "x.pt")),
                         ConfigError)
    assert "choose one" in message


def test_unavailable_or_invalid_device_and_dtype_are_config_errors():
    import torch

    if not torch.cuda.is_available():
        assert "no CUDA device" in load_error(config(random_weights=True, device="cuda"),
                                              ConfigError)
    assert "'tpu'" in load_error(config(random_weights=True, device="tpu"), ConfigError)
    message = load_error(config(random_weights=True, device="cpu", dtype="bfloat16"), ConfigError)
    assert "float32" in message


@pytest.mark.parametrize(("requested", "available", "count", "expected"), [
    ("", True, 2, "cuda:0"), ("", False, 0, "cpu"), ("cpu", True, 1, "cpu"),
    ("cuda", True, 1, "cuda:0"), ("CUDA:1", True, 2, "cuda:1"), (" cuda:0 ", True, 1, "cuda:0"),
])
def test_resolve_device(requested, available, count, expected):
    assert resolve_device(requested, available, count) == expected


@pytest.mark.parametrize(("requested", "available", "count", "fragment"), [
    ("cuda:2", True, 2, "only 2 CUDA device"), ("cuda", False, 0, "no CUDA device"),
    ("cuda:x", True, 1, "is not"), ("gpu", True, 1, "is not"),
])
def test_resolve_device_errors(requested, available, count, fragment):
    with pytest.raises(ConfigError, match=fragment):
        resolve_device(requested, available, count)


def test_resolve_dtype():
    assert resolve_dtype("", "cuda:0") == "bfloat16"
    assert resolve_dtype("", "cuda:0", bf16_supported=False) == "float16"
    assert resolve_dtype("float16", "cuda:0") == "float16"
    assert resolve_dtype("", "cpu") == "float32"
    with pytest.raises(ConfigError, match="float16"):
        resolve_dtype("bfloat16", "cuda:0", bf16_supported=False)
    with pytest.raises(ConfigError, match="CPU"):
        resolve_dtype("float16", "cpu")


def test_frame_key_follows_identity_and_content():
    image = np.zeros((480, 640, 3), np.uint8)
    key = frame_key(image)
    assert frame_key(image) == key
    assert frame_key(image.copy()) != key  # another object
    image[::8, ::8] = 255  # refilled in place (e.g. a reused camera buffer)
    assert frame_key(image) != key


def test_importing_the_backend_does_not_import_torch():
    code = ("import sys, sam3_agent_ros.segmenters.sam3, sam3_agent_ros.segmenters.sam3_files; "
            "assert 'torch' not in sys.modules and 'sam3' not in sys.modules, 'torch imported'")
    subprocess.run([sys.executable, "-c", code], check=True)

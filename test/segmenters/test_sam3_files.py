"""SAM 3's files: the BPE vocabulary and the checkpoint, checked and read without the model."""

from __future__ import annotations

import dataclasses
import hashlib
import subprocess
import sys
from pathlib import Path

import pytest

from sam3_agent_ros.config import ConfigError, SegmenterConfig
from sam3_agent_ros.core.errors import SegmenterError
from sam3_agent_ros.segmenters.sam3_files import (
    BPE_SHA256,
    LICENSE_URL,
    Sam3LoadError,
    check_checkpoint_path,
    check_loadable,
    download_checkpoint,
    find_bpe,
    read_checkpoint,
    select_image_weights,
)


def config(**changes) -> SegmenterConfig:
    return dataclasses.replace(SegmenterConfig(), backend="sam3", **changes)


def one_line(exc_info) -> str:
    message = str(exc_info.value)
    assert "\n" not in message, message
    return message


def test_load_errors_are_segmenter_errors():
    assert issubclass(Sam3LoadError, SegmenterError)


def test_default_bpe_is_open_clips_verified_copy():
    path = Path(find_bpe(""))
    assert path.parent.name == "open_clip"
    assert hashlib.sha256(path.read_bytes()).hexdigest() == BPE_SHA256


def test_a_bpe_file_is_checked_by_its_sha256(tmp_path):
    wrong = tmp_path / "vocab.txt.gz"
    wrong.write_bytes(b"not the vocabulary")
    with pytest.raises(Sam3LoadError) as info:
        find_bpe(str(wrong))
    assert "sha256" in one_line(info) and "segmenter.bpe_path" in str(info.value)
    with pytest.raises(Sam3LoadError, match="cannot be read"):
        find_bpe(str(tmp_path / "none.gz"))
    original = Path(find_bpe(""))
    assert find_bpe(str(original)) == str(original)


def test_checkpoint_path_must_be_a_readable_file(tmp_path):
    with pytest.raises(Sam3LoadError) as info:
        check_checkpoint_path(str(tmp_path / "nowhere.pt"))
    assert "does not exist" in one_line(info) and "segmenter.checkpoint" in str(info.value)
    with pytest.raises(Sam3LoadError, match="is not a file"):
        check_checkpoint_path(str(tmp_path))
    path = tmp_path / "sam3.pt"
    path.write_bytes(b"x")
    assert check_checkpoint_path(str(path)) == path


def test_read_checkpoint_unwraps_a_model_entry_and_reads_safetensors(tmp_path):
    import torch
    from safetensors.torch import save_file

    nested = tmp_path / "nested.pt"
    torch.save({"model": {"detector.a": torch.ones(2)}, "optimizer": {}}, nested)
    assert list(read_checkpoint(nested)) == ["detector.a"]
    flat = tmp_path / "flat.safetensors"
    save_file({"detector.b": torch.zeros(3)}, str(flat))
    assert list(read_checkpoint(flat)) == ["detector.b"]


@pytest.mark.parametrize("name", ["garbage.pt", "garbage.safetensors"])
def test_garbage_is_not_a_readable_checkpoint(tmp_path, name):
    path = tmp_path / name
    path.write_bytes(b"this is not a checkpoint\x00\x01" * 100)
    with pytest.raises(Sam3LoadError) as info:
        read_checkpoint(path)
    assert "is not a readable checkpoint" in one_line(info) and LICENSE_URL in str(info.value)


def test_image_weights_are_the_detector_keys_without_their_prefix():
    state = {"detector.backbone.w": 1, "detector.head.b": 2, "tracker.x": 3, 7: 4}
    assert select_image_weights(state, "sam3.pt") == {"backbone.w": 1, "head.b": 2}
    with pytest.raises(Sam3LoadError) as info:
        select_image_weights({"encoder.layer.weight": 0}, "other.pt")
    assert "has no 'detector.*' weights" in one_line(info)
    assert "encoder.layer.weight" in str(info.value)


def test_gated_repo_refusal_says_accept_the_license(monkeypatch, tmp_path):
    import httpx
    import huggingface_hub
    from huggingface_hub.errors import GatedRepoError

    def refuse(*_args, **_kwargs):
        request = httpx.Request("GET", "https://huggingface.co/facebook/sam3/resolve/main/sam3.pt")
        raise GatedRepoError("401 gated", response=httpx.Response(401, request=request))

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", refuse)
    with pytest.raises(Sam3LoadError) as info:
        download_checkpoint(cache_dir=str(tmp_path), offline=False)
    assert "accept the license at " + LICENSE_URL in one_line(info)
    assert "hf auth login" in str(info.value)


def test_offline_download_from_an_empty_cache_says_how_to_get_the_file(tmp_path):
    with pytest.raises(Sam3LoadError) as info:
        download_checkpoint(cache_dir=str(tmp_path / "hf-cache"), offline=True)
    assert "HF_HUB_OFFLINE" in one_line(info) and "hf download facebook/sam3" in str(info.value)


def test_check_loadable_accepts_random_weights_and_refuses_both_weight_choices(tmp_path):
    check_loadable(config(random_weights=True))  # torch, sam3 and the vocabulary are here
    with pytest.raises(ConfigError, match="choose one"):
        check_loadable(config(random_weights=True, checkpoint=str(tmp_path / "x.pt")))
    with pytest.raises(Sam3LoadError, match="does not exist"):
        check_loadable(config(checkpoint=str(tmp_path / "x.pt")))


def test_the_cheap_checks_import_neither_torch_nor_sam3(tmp_path):
    code = ("import sys, dataclasses\n"
            "from sam3_agent_ros.config import SegmenterConfig\n"
            "from sam3_agent_ros.segmenters.sam3_files import check_loadable\n"
            "check_loadable(dataclasses.replace(SegmenterConfig(), random_weights=True))\n"
            "assert 'torch' not in sys.modules and 'sam3' not in sys.modules, 'imported'\n")
    subprocess.run([sys.executable, "-c", code], check=True)

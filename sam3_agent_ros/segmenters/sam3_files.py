"""SAM 3's files: the BPE vocabulary and the checkpoint (a local file or the Hugging Face hub).

Each function checks or fetches one file and fails with a one-line ``Sam3LoadError`` naming the
fix. ``check_loadable`` runs the cheap checks in milliseconds (no torch import) before anything
slow starts; ``segmenters/sam3.py`` uses the rest while it loads the model.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
from pathlib import Path
from typing import Any

from sam3_agent_ros.config import ConfigError
from sam3_agent_ros.core.errors import SegmenterError

HUB_REPO = "facebook/sam3"
HUB_FILENAME = "sam3.pt"
LICENSE_URL = "https://huggingface.co/facebook/sam3"
BPE_FILENAME = "bpe_simple_vocab_16e6.txt.gz"
BPE_SHA256 = "924691ac288e54409236115652ad4aa250f48203de50a9e4722a6ecd48d6804a"
CHECKPOINT_PREFIX = "detector."  # the image model's weights in sam3.pt


class Sam3LoadError(SegmenterError):
    """SAM 3 could not be loaded; the message is one line naming the fix."""

    def __init__(self, message: str) -> None:
        super().__init__(message, kind=SegmenterError.LOAD)


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


def check_weights_choice(cfg: Any) -> None:
    """``segmenter.random_weights`` and ``segmenter.checkpoint`` exclude each other."""
    if cfg.random_weights and cfg.checkpoint:
        raise ConfigError("segmenter.random_weights is true but segmenter.checkpoint is set: "
                          "choose one")


def check_loadable(cfg: Any) -> None:
    """What loading SAM 3 needs, checked in milliseconds before anything slow (no torch import):
    torch and sam3 installed, the BPE vocabulary, and weights: ``segmenter.checkpoint`` a readable
    file, or (empty) ``sam3.pt`` cached or downloadable (``check_hub_weights``); none with
    ``segmenter.random_weights``. Raises ``Sam3LoadError`` / ``ConfigError``, one line each."""
    check_weights_choice(cfg)
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

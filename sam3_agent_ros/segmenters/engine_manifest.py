"""The manifest of an ONNX export of SAM 3, and the check that it fits the weights in use.

An export folder holds one ``<part>.onnx`` (+ ``<part>.onnx.data``, the weights) per exported
part and ``manifest.json``, written last (a folder without it is an unfinished export):

    {"format": 1, "weights_sha256": "...", "dtype": "float32", "opset": 18, "resolution": 1008,
     "versions": {"sam3": "0.1.4", "torch": "2.13.0", "onnx": "1.23.2"},
     "parts": {"image_encoder": {"file": "image_encoder.onnx", "bytes": 1842000000,
                                 "inputs": [{"name": "image", "shape": [1, 3, 1008, 1008],
                                             "dtype": "float32"}], "outputs": [...]}},
     "in_torch": {"grounding": "why it stays in torch"},
     "export": {"seconds": 41.2, "peak_rss_gib": 7.1, "bytes": 1842000000, "created": "..."}}

``weights_hash`` fingerprints the model's weights (names, shapes, dtypes and bytes);
``manifest_problem`` says why a manifest cannot serve these weights (or None). Pure apart from
reading files; torch only inside ``weights_hash``.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

MANIFEST_NAME = "manifest.json"
FORMAT = 1
DTYPES = ("float32", "float16")


class ManifestError(ValueError):
    """A manifest that cannot be read or does not fit; the message says why."""


def weights_hash(model: Any) -> str:
    """sha256 over every parameter and buffer of ``model`` (sorted by name: name, dtype, shape,
    bytes). The same weights give the same hash whatever file they came from. Seconds for SAM 3
    (3.4 GB); run it while the model is on the CPU."""
    import torch

    digest = hashlib.sha256()
    state = model.state_dict()
    for name in sorted(state):
        tensor = state[name].detach()
        digest.update(f"{name}|{tensor.dtype}|{tuple(tensor.shape)}\n".encode())
        if tensor.device.type != "cpu":
            tensor = tensor.cpu()
        tensor = tensor.contiguous()
        if tensor.numel():
            digest.update(memoryview(tensor.view(-1).view(torch.uint8).numpy()))
    return digest.hexdigest()


def default_engine_dir(weights_sha256: str, home: Path | None = None) -> Path:
    """``~/.cache/sam3_agent_ros/engines/<weights hash>/`` (XDG_CACHE_HOME is not consulted:
    the path is the one the docs name)."""
    return (home or Path.home()) / ".cache" / "sam3_agent_ros" / "engines" / weights_sha256


def read_manifest(folder: Path) -> dict:
    """The manifest of the export in ``folder``; ``ManifestError`` when missing or unreadable."""
    path = Path(folder) / MANIFEST_NAME
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ManifestError(f"{path} does not exist (not an export, or an unfinished one)"
                            ) from None
    except OSError as exc:
        raise ManifestError(f"{path} cannot be read: {exc.strerror or exc}") from None
    try:
        manifest = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ManifestError(f"{path} is not JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(manifest, dict):
        raise ManifestError(f"{path} holds a {type(manifest).__name__}, not an object")
    return manifest


def manifest_problem(manifest: dict, folder: Path, weights_sha256: str,
                     expected_parts: dict[str, tuple[tuple[str, ...], tuple[str, ...]]]
                     ) -> str | None:
    """Why the export in ``folder`` described by ``manifest`` cannot be used with the weights
    whose hash is ``weights_sha256``, or None when it can. ``expected_parts``: part name ->
    (input names, output names) the engine feeds and reads; each part the manifest lists must
    have them, and its file must exist with the size written down."""
    if manifest.get("format") != FORMAT:
        return f"manifest format {manifest.get('format')!r}, this version reads {FORMAT}"
    exported = manifest.get("weights_sha256")
    if exported != weights_sha256:
        return (f"exported from other weights (sha256 {str(exported)[:12]}...; the weights in "
                f"use are {weights_sha256[:12]}...)")
    if manifest.get("dtype") not in DTYPES:
        return f"dtype {manifest.get('dtype')!r} is not one of {', '.join(DTYPES)}"
    parts = manifest.get("parts")
    if not isinstance(parts, dict) or not parts:
        return "it lists no exported part"
    for name, part in parts.items():
        if name not in expected_parts:
            return f"part {name!r} is unknown to this version"
        if not isinstance(part, dict):
            return f"part {name!r} is not an object"
        inputs, outputs = expected_parts[name]
        has_inputs, has_outputs = _tensor_names(part, "inputs"), _tensor_names(part, "outputs")
        if has_inputs != inputs or has_outputs != outputs:
            return (f"part {name!r} has inputs {list(has_inputs)} and outputs "
                    f"{list(has_outputs)}, expected {list(inputs)} and {list(outputs)}")
        problem = _files_problem(Path(folder), name, part)
        if problem:
            return problem
    return None


def _tensor_names(part: dict, key: str) -> tuple[str, ...]:
    return tuple(str(t.get("name")) for t in part.get(key) or () if isinstance(t, dict))


def _files_problem(folder: Path, name: str, part: dict) -> str | None:
    files = part.get("files")
    if not isinstance(files, dict) or not files:
        return f"part {name!r} names no files"
    for file_name, size in files.items():
        path = folder / str(file_name)
        if Path(str(file_name)).name != str(file_name):
            return f"part {name!r} names a file outside the folder: {file_name!r}"
        try:
            actual = path.stat().st_size
        except OSError:
            return f"{path} is missing"
        if actual != size:
            return f"{path} has {actual} bytes, the manifest says {size} (a damaged copy?)"
    return None


def write_manifest(folder: Path, manifest: dict) -> Path:
    """Write ``manifest.json`` atomically (a reader sees the old one or the whole new one)."""
    path = Path(folder) / MANIFEST_NAME
    temporary = path.with_suffix(".json.tmp")
    temporary.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    temporary.replace(path)
    return path


def export_bytes(manifest: dict) -> int:
    """The size of every file of the export's parts."""
    return sum(int(size) for part in (manifest.get("parts") or {}).values()
               for size in (part.get("files") or {}).values())

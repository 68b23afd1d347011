"""A scene frame's ground truth as a small ``.npz`` (the example image's, the sample bags')."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path
from typing import Any

import numpy as np


def save_ground_truth(frame: Any, path: str | Path) -> None:
    """Write the ground truth of a ``scene.SceneFrame`` as a small compressed ``.npz``:
    ``labels`` (uint8, k on the k-th name), ``names``, ``colors``, ``shapes``, ``positions_m``
    (N, 3), ``centroids_px`` (N, 2), ``depth_mm`` (uint16) and ``K`` (3x3)."""
    objs = frame.scene.objects
    arrays = {
        "labels": frame.label_image(), "names": np.array([o.name for o in objs]),
        "colors": np.array([o.color_name for o in objs]),
        "shapes": np.array([o.shape for o in objs]),
        "positions_m": np.array([frame.positions[o.name] for o in objs], np.float64),
        "centroids_px": np.array([frame.centroid_px(o.name) for o in objs], np.float64),
        "depth_mm": frame.depth_mm(), "K": frame.intrinsics.K,
    }
    # Like np.savez_compressed, but with a fixed timestamp so the bytes are reproducible.
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for key, array in arrays.items():
            info = zipfile.ZipInfo(f"{key}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            buffer = io.BytesIO()
            np.lib.format.write_array(buffer, np.ascontiguousarray(array), allow_pickle=False)
            archive.writestr(info, buffer.getvalue())


def load_ground_truth_masks(path: str | Path) -> dict[str, np.ndarray]:
    """``{name: bool (H, W) mask}`` from a file written by ``save_ground_truth``."""
    with np.load(path) as data:
        labels = data["labels"]
        names = [str(n) for n in data["names"]]
    return {name: labels == index for index, name in enumerate(names, start=1)}

"""Labelled sets for ``sam3-agent eval``: the two layouts, told apart by what the folder holds.

- **jsonl**: ``DIR/annotations.jsonl``, one sample a line: ``{"id", "image" (path relative to
  DIR), "query", "mask" (a PNG, nonzero = object) or "polygons" ([[[x, y], ...], ...]),
  optional "ignore_polygons" (excluded from scoring) and "is_sentence"}``. Neither ``mask`` nor
  ``polygons``: the object is absent and ``no_mask`` is the right answer.
- **reasonseg**: ReasonSeg's own files, ``DIR/<stem>.jpg|.png`` beside ``DIR/<stem>.json`` with
  ``"text"`` (a list of queries, or one string), ``"is_sentence"`` and ``"shapes"`` (``label``
  ``target`` or ``ignore``, ``points`` in pixels). Query k of ``<stem>`` is sample ``<stem>#<k>``.
  As in LISA's loader (``utils/data_processing.py``), shapes labelled ``flag`` are skipped, a
  label containing ``ignore`` is an ignore region, points are truncated to integers and the
  polygons are painted largest first (outline included), so a smaller polygon inside a larger one
  decides its own pixels. LISA's validation scores only the first query of each image:
  ``--first-query`` does the same.

Reading a layout only parses the annotation text; images and masks are read per sample
(``load_image`` / ``load_truth``), so one broken file fails one sample, not the run.

Every image, mask and ReasonSeg annotation path must resolve (symlinks followed) inside the
dataset folder: a downloaded set must not make the run read, score and copy into ``worst/`` files
from elsewhere (``../x.png``, ``/home/...``, a symlink out). A sample with such a path is kept
but ``refused`` (the reason says which path); nothing of it is read. ``allow_outside_paths``
(``sam3-agent eval --allow-outside-paths``) lifts the rule for a set one trusts.
Sizes come from the PNG/JPEG headers before decoding: an image over ``max_image_pixels`` and a mask
of another size than its image are refused undecoded.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path

import cv2
import numpy as np

from sam3_agent_ros.image_header import ImageHeaderError, encoded_size
from sam3_agent_ros.inputs import read_rgb

ANNOTATIONS = "annotations.jsonl"
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png")
Polygon = list[list[float]]


class DatasetError(ValueError):
    """The dataset cannot be read (missing folder, unknown layout, malformed annotation);
    the message names the file and line."""


class SampleError(ValueError):
    """One sample's image or truth cannot be read; that sample fails, the run goes on."""


@dataclass(frozen=True)
class Sample:
    id: str
    query: str
    image: Path
    # Ground truth: a mask PNG, or target polygons painted with the ignore polygons in
    # ``shapes`` order; neither means the object is absent.
    mask: Path | None = None
    shapes: tuple[tuple[str, Polygon], ...] = ()  # ("target" | "ignore", points)
    is_sentence: bool | None = None
    refused: str | None = None  # why none of its files may be read (a path outside the set)

    @property
    def absent(self) -> bool:
        return self.mask is None and not any(kind == "target" for kind, _ in self.shapes)


@dataclass(frozen=True)
class Dataset:
    root: Path
    layout: str  # "jsonl" | "reasonseg"
    samples: list[Sample] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.root.resolve().name


def load_dataset(root: str | Path, allow_outside_paths: bool = False) -> Dataset:
    """Detect the layout of ``root`` and read its annotations (``DatasetError`` on any problem).
    Samples whose paths resolve outside ``root`` are ``refused`` unless ``allow_outside_paths``."""
    root = Path(root)
    if not root.is_dir():
        raise DatasetError(f"dataset {root}: no such directory")
    if (root / ANNOTATIONS).is_file():
        _check_annotation_file(root, root / ANNOTATIONS, allow_outside_paths)
        samples = read_jsonl(root)
        layout = "jsonl"
    elif any(_reasonseg_pairs(root)):
        samples = read_reasonseg(root, allow_outside_paths)
        layout = "reasonseg"
    else:
        raise DatasetError(f"dataset {root}: unknown layout (expected {ANNOTATIONS}, or "
                           "ReasonSeg's <stem>.jpg|png beside <stem>.json)")
    if not samples:
        raise DatasetError(f"dataset {root}: no samples")
    if not allow_outside_paths:
        samples = [_refuse_outside(root, sample) for sample in samples]
    ids = [s.id for s in samples]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise DatasetError(f"dataset {root}: duplicate sample ids {duplicates[:5]}")
    return Dataset(root, layout, samples)


def first_queries(dataset: Dataset) -> list[Sample]:
    """ReasonSeg: only query 0 of each image (what LISA's validation scores)."""
    if dataset.layout != "reasonseg":
        raise DatasetError(f"dataset {dataset.root}: --first-query applies to the ReasonSeg "
                           f"layout, this one is {dataset.layout}")
    return [s for s in dataset.samples if s.id.endswith("#0")]


def read_jsonl(root: Path) -> list[Sample]:
    path = root / ANNOTATIONS
    samples = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            record = json.loads(line)
        except ValueError as exc:
            raise DatasetError(f"{where}: not JSON ({exc})") from None
        if not isinstance(record, dict):
            raise DatasetError(f"{where}: expected a JSON object")
        for key in ("id", "image", "query"):
            if not isinstance(record.get(key), str) or not record[key].strip():
                raise DatasetError(f"{where}: '{key}' must be a non-empty string")
        if "mask" in record and "polygons" in record:
            raise DatasetError(f"{where}: give 'mask' or 'polygons', not both")
        mask = record.get("mask")
        if mask is not None and not isinstance(mask, str):
            raise DatasetError(f"{where}: 'mask' must be a path string")
        shapes = [("target", p) for p in _polygons(record.get("polygons", []), where, "polygons")]
        shapes += [("ignore", p)
                   for p in _polygons(record.get("ignore_polygons", []), where, "ignore_polygons")]
        is_sentence = record.get("is_sentence")
        if is_sentence is not None and not isinstance(is_sentence, bool):
            raise DatasetError(f"{where}: 'is_sentence' must be true or false")
        samples.append(Sample(id=record["id"], query=record["query"], image=root / record["image"],
                              mask=root / mask if mask else None, shapes=tuple(shapes),
                              is_sentence=is_sentence))
    return samples


def read_reasonseg(root: Path, allow_outside_paths: bool = False) -> list[Sample]:
    samples = []
    for image, annotation in _reasonseg_pairs(root):
        refused = None if allow_outside_paths else outside_reason(root, annotation, "annotation")
        if refused:  # not even parsed: one refused sample stands for its queries
            samples.append(Sample(id=f"{image.stem}#0", query="", image=image, refused=refused))
            continue
        record = _read_json(annotation)
        if not isinstance(record, dict):
            raise DatasetError(f"{annotation}: expected a JSON object")
        texts = record.get("text")
        texts = [texts] if isinstance(texts, str) else texts
        if not isinstance(texts, list) or not texts or not all(
                isinstance(t, str) and t.strip() for t in texts):
            raise DatasetError(f"{annotation}: 'text' must be a non-empty list of queries")
        shapes = record.get("shapes")
        if not isinstance(shapes, list):
            raise DatasetError(f"{annotation}: 'shapes' must be a list")
        parsed = []
        for index, shape in enumerate(shapes):
            where = f"{annotation}: shapes[{index}]"
            if not isinstance(shape, dict) or not isinstance(shape.get("label"), str):
                raise DatasetError(f"{where}: expected an object with a 'label'")
            label = shape["label"].lower()
            if label == "flag":  # deprecated marks in ReasonSeg, skipped by LISA too
                continue
            kind = "ignore" if "ignore" in label else "target"
            parsed.append((kind, _polygon(shape.get("points"), where)))
        is_sentence = record.get("is_sentence")
        is_sentence = bool(is_sentence) if is_sentence is not None else None
        for index, text in enumerate(texts):
            samples.append(Sample(id=f"{image.stem}#{index}", query=text.strip(), image=image,
                                  shapes=tuple(parsed), is_sentence=is_sentence))
    return samples


def outside_reason(root: Path, path: Path, what: str) -> str | None:
    """Why ``path`` may not be read: it resolves (symlinks followed) outside ``root``; None when
    it stays inside (a missing file inside is for the reader to report)."""
    try:
        inside = path.resolve().is_relative_to(root.resolve())
    except (OSError, RuntimeError) as exc:  # e.g. a symlink loop
        return f"{what} {path}: cannot resolve its path ({exc})"
    if inside:
        return None
    return (f"{what} {path} resolves outside the dataset folder; not read (sam3-agent eval "
            "--allow-outside-paths reads it)")


def _refuse_outside(root: Path, sample: Sample) -> Sample:
    if sample.refused:
        return sample
    paths = [("image", sample.image)] + ([("mask", sample.mask)] if sample.mask else [])
    for what, path in paths:
        reason = outside_reason(root, path, what)
        if reason:
            return dataclasses.replace(sample, refused=reason)
    return sample


def _check_annotation_file(root: Path, path: Path, allow_outside_paths: bool) -> None:
    reason = None if allow_outside_paths else outside_reason(root, path, "annotations file")
    if reason:
        raise DatasetError(f"dataset {root}: {reason}")


def _read_json(path: Path):
    """A few ReasonSeg files are cp1252, not UTF-8 (LISA's loader falls back the same way)."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise DatasetError(f"{path}: not readable ({exc})") from None
    for encoding in ("utf-8", "cp1252"):
        try:
            return json.loads(raw.decode(encoding))
        except UnicodeDecodeError:
            continue
        except ValueError as exc:
            raise DatasetError(f"{path}: not readable JSON ({exc})") from None
    raise DatasetError(f"{path}: neither UTF-8 nor cp1252 text")


def _reasonseg_pairs(root: Path):
    for annotation in sorted(root.glob("*.json")):
        for suffix in IMAGE_SUFFIXES:
            image = annotation.with_suffix(suffix)
            if image.is_file():
                yield image, annotation
                break


def _polygons(value, where: str, key: str) -> list[Polygon]:
    if not isinstance(value, list):
        raise DatasetError(f"{where}: '{key}' must be a list of polygons")
    return [_polygon(p, f"{where}: {key}[{i}]") for i, p in enumerate(value)]


def _polygon(points, where: str) -> Polygon:
    ok = isinstance(points, list) and len(points) >= 3 and all(
        isinstance(p, list) and len(p) == 2 and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in p) for p in points)
    if not ok:
        raise DatasetError(f"{where}: a polygon is a list of at least 3 [x, y] points")
    return [[float(x), float(y)] for x, y in points]


# --- per sample ---------------------------------------------------------------------------------

def load_image(sample: Sample, max_pixels: int | None = None) -> np.ndarray:
    """RGB uint8 (H, W, 3), or ``SampleError`` (also past ``max_pixels``, before decoding)."""
    if sample.refused:
        raise SampleError(sample.refused)
    try:
        return read_rgb(sample.image, max_pixels)
    except ValueError as exc:
        raise SampleError(f"image {sample.image}: {exc}") from None


def load_truth(sample: Sample, shape: tuple[int, int]) -> tuple[np.ndarray, np.ndarray | None]:
    """(truth bool (H, W), ignore bool (H, W) or None) at the image's ``shape``."""
    if sample.refused:
        raise SampleError(sample.refused)
    if sample.mask is not None:
        truth = _read_mask(sample.mask, shape) > 0
        if not sample.shapes:
            return truth, None
        painted = paint_shapes(sample.shapes, shape)
        return truth & (painted != 255), painted == 255
    painted = paint_shapes(sample.shapes, shape)
    ignore = painted == 255
    return painted == 1, ignore if ignore.any() else None


def _read_mask(path: Path, shape: tuple[int, int]) -> np.ndarray:
    """The mask file as (H, W) values at the image's ``shape``. Its size is read from its header
    first: a mask of another size (a decompression bomb included) is never decoded."""
    height, width = shape
    data = np.fromfile(path, dtype=np.uint8) if path.is_file() else None
    try:
        _, mask_width, mask_height = encoded_size(data) if data is not None else ("", 0, 0)
    except ImageHeaderError:
        data = None
    if data is None:
        raise SampleError(f"mask {path}: missing or not a readable PNG")
    if (mask_height, mask_width) != (height, width):
        raise SampleError(f"mask {path}: {mask_width}x{mask_height}, the image is "
                          f"{width}x{height}")
    mask = cv2.imdecode(data, cv2.IMREAD_UNCHANGED)
    if mask is None:
        raise SampleError(f"mask {path}: missing or not a readable PNG")
    if mask.ndim == 3:
        mask = mask.max(axis=2)
    if mask.shape != (height, width):  # e.g. a JPEG mask turned by its EXIF orientation
        raise SampleError(f"mask {path}: {mask.shape[1]}x{mask.shape[0]}, the image is "
                          f"{width}x{height}")
    return mask


def paint_shapes(shapes, shape: tuple[int, int]) -> np.ndarray:
    """uint8 (H, W): 1 on target, 255 on ignore, 0 elsewhere; polygons painted largest first
    (outline included) so that nested smaller ones win."""
    canvas = np.zeros(shape, np.uint8)
    polygons = []
    for kind, points in shapes:
        # Truncated to int32 as LISA's loader does, so the truth matches its pixels exactly.
        contour = np.asarray(points, np.float64).astype(np.int32).reshape(-1, 1, 2)
        scratch = np.zeros(shape, np.uint8)
        cv2.fillPoly(scratch, [contour], 1)
        cv2.polylines(scratch, [contour], True, 1, 1)
        polygons.append((int(scratch.sum()), kind, contour))
    for _area, kind, contour in sorted(polygons, key=lambda p: -p[0]):
        value = 255 if kind == "ignore" else 1
        cv2.fillPoly(canvas, [contour], value)
        cv2.polylines(canvas, [contour], True, value, 1)
    return canvas

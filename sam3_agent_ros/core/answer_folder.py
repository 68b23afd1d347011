"""An answer on disk: what ``sam3-agent run --out DIR`` keeps so that ``run --refines DIR`` can
correct it later (interface §8c). Plain files, each readable on its own:

- ``frame.png``: the frame the query was answered on (RGB, lossless);
- ``masks/1.png`` .. ``masks/N.png``: the selected masks in answer order (mono8, 255 = mask; the
  ids of the result JSON, the values of ``mask.png``'s sibling ``~/labels`` on ROS);
- ``answer.json``: ``{"format": 1, "result": <the result JSON as printed>, "earlier": [...]}``;
  ``earlier`` lists the answers this one corrected, oldest first (each ``query_id``, ``query``,
  ``status``, ``masks``, ``text_prompts``, ``refines``; at most ``answers.MAX_EARLIER``).

(``overlay.png`` and ``mask.png``, written beside them, are for people.) Reading checks every
file: a missing or inconsistent one raises ``AnswerFolderError`` with what is wrong, and the
frame is decoded only under the pixel cap (``image_header.py``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from sam3_agent_ros.core import finite_json
from sam3_agent_ros.core.answers import ANSWERED, MAX_EARLIER, AnswerRecord, KeptAnswer
from sam3_agent_ros.core.types import Frame, Mask, Result
from sam3_agent_ros.image_header import ImageHeaderError, decode_bounded

FORMAT = 1
FRAME_FILE = "frame.png"
MASKS_DIR = "masks"
ANSWER_FILE = "answer.json"
MAX_ANSWER_JSON_BYTES = 10 * 1024 * 1024  # an answer.json is a few KB; anything huge is refused
_MASK_FILE = re.compile(r"^[0-9]+\.png$")


class AnswerFolderError(ValueError):
    """The folder does not hold a usable answer; the message says what is wrong."""


def write_answer_folder(out: Path, result: Result, refined: KeptAnswer | None = None) -> None:
    """Write ``result`` (and, for a refinement, the chain it corrected) into ``out``. Mask files
    of an earlier answer written there are removed first. A result without a frame writes only
    ``answer.json``."""
    out = Path(out)
    masks_dir = out / MASKS_DIR
    masks_dir.mkdir(parents=True, exist_ok=True)
    for stale in masks_dir.iterdir():
        if _MASK_FILE.match(stale.name):
            stale.unlink()
    if result.frame is None:  # an earlier answer's frame would not be this one's
        (out / FRAME_FILE).unlink(missing_ok=True)
    else:
        _write_png(out / FRAME_FILE, cv2.cvtColor(result.frame.image, cv2.COLOR_RGB2BGR))
        for index, mask in enumerate(result.masks, start=1):
            _write_png(masks_dir / f"{index}.png", mask.mask.astype(np.uint8) * 255)
    earlier = refined.chain[-MAX_EARLIER:] if refined is not None else ()
    document = {"format": FORMAT, "result": result.to_json(),
                "earlier": [record.to_json() for record in earlier]}
    (out / ANSWER_FILE).write_text(finite_json.dumps(document, indent=1) + "\n")


def read_answer_folder(folder: Path, max_pixels: int) -> KeptAnswer:
    """The answer kept in ``folder`` (``write_answer_folder``), ready to be refined."""
    folder = Path(folder)
    document = _read_document(folder)
    result = document["result"]
    try:
        record = AnswerRecord.from_json(result)
        earlier = tuple(AnswerRecord.from_json(e) for e in document.get("earlier") or ())
        stamp = result.get("stamp") or {}
        sec, nanosec = int(stamp.get("sec", 0)), int(stamp.get("nanosec", 0))
        frame_id = str(result.get("frame_id", ""))
    except (KeyError, TypeError, ValueError) as exc:
        raise AnswerFolderError(f"{folder / ANSWER_FILE}: not an answer written by sam3-agent "
                                f"run --out ({type(exc).__name__}: {exc})") from None
    if record.status not in {s.value for s in ANSWERED}:
        raise AnswerFolderError(f"{folder}: its query {record.query_id!r} ended {record.status} "
                                "without an answer: there is nothing to refine")
    image = _read_png(folder / FRAME_FILE, max_pixels, cv2.IMREAD_COLOR)
    frame = Frame(cv2.cvtColor(image, cv2.COLOR_BGR2RGB), sec, nanosec, frame_id)
    masks = []
    for index, facts in enumerate(record.selected, start=1):
        pixels = _read_png(folder / MASKS_DIR / f"{index}.png", max_pixels, cv2.IMREAD_GRAYSCALE)
        if pixels.shape != image.shape[:2]:
            raise AnswerFolderError(f"{folder / MASKS_DIR / f'{index}.png'} is "
                                    f"{pixels.shape[1]}x{pixels.shape[0]}, the frame "
                                    f"{image.shape[1]}x{image.shape[0]}")
        masks.append(Mask.from_array(pixels > 127, facts.score, facts.bbox))
    return KeptAnswer(record, frame, tuple(masks), earlier[-MAX_EARLIER:])


def _read_document(folder: Path) -> dict[str, Any]:
    path = folder / ANSWER_FILE
    if not folder.is_dir():
        raise AnswerFolderError(f"{folder} is not a folder (give the --out of an earlier run)")
    if not path.is_file():
        raise AnswerFolderError(f"{folder} has no {ANSWER_FILE}: it is not the --out of a "
                                "sam3-agent run (runs write it since refinement exists)")
    if path.stat().st_size > MAX_ANSWER_JSON_BYTES:
        raise AnswerFolderError(f"{path} is larger than {MAX_ANSWER_JSON_BYTES} bytes")
    try:
        document = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise AnswerFolderError(f"{path} cannot be read: {exc}") from None
    if not isinstance(document, dict) or not isinstance(document.get("result"), dict):
        raise AnswerFolderError(f"{path}: expected {{\"format\": {FORMAT}, \"result\": {{...}}, "
                                "\"earlier\": [...]}")
    if document.get("format") != FORMAT:
        raise AnswerFolderError(f"{path}: format {document.get('format')!r}, this version "
                                f"reads format {FORMAT}")
    return document


def _write_png(path: Path, image: np.ndarray) -> None:
    if not cv2.imwrite(str(path), image):
        raise OSError(f"cannot write {path}")


def _read_png(path: Path, max_pixels: int, flags: int) -> np.ndarray:
    if not path.is_file():
        raise AnswerFolderError(f"{path} is missing")
    try:
        return decode_bounded(np.fromfile(path, dtype=np.uint8), max_pixels, flags)
    except (ImageHeaderError, ValueError) as exc:
        raise AnswerFolderError(f"{path}: {exc}") from None

"""The shipped labelled sets are what scripts/make_eval_set.py generates (no hand edits, no
drift from demo/sam3_agent_demo/scene.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np

REPO = Path(__file__).resolve().parents[2]


def test_generator_reproduces_the_shipped_sets(tmp_path):
    subprocess.run([sys.executable, str(REPO / "scripts" / "make_eval_set.py"), "--out",
                    str(tmp_path)], check=True, capture_output=True, timeout=300)
    for name in ("eval_tabletop", "eval_reasonseg_mini"):
        shipped, fresh = REPO / "data" / name, tmp_path / name
        files = sorted(p.relative_to(shipped) for p in shipped.rglob("*") if p.is_file())
        assert files == sorted(p.relative_to(fresh) for p in fresh.rglob("*") if p.is_file())
        for rel in files:
            if rel.suffix in (".json", ".jsonl"):
                assert (shipped / rel).read_text() == (fresh / rel).read_text(), rel
            else:  # decoded pixels: JPEG/PNG encoder versions may change the bytes, not much more
                a = cv2.imread(str(shipped / rel), cv2.IMREAD_UNCHANGED).astype(np.int16)
                b = cv2.imread(str(fresh / rel), cv2.IMREAD_UNCHANGED).astype(np.int16)
                limit = 0 if rel.parts[0] == "masks" or rel.suffix == ".png" else 8
                assert a.shape == b.shape and np.abs(a - b).max() <= limit, rel

#!/usr/bin/env python3
"""Regenerate the moving sample bags and their ground truth (follow mode): data/sample_moving/
(the camera pans, objects move, one leaves the view) and data/sample_grasp/ (an object taken away
in place beside its look-alike).

    .venv/bin/python scripts/make_moving_bag.py [--sample moving|grasp|all] [--out DIR]

Deterministic: running it again writes the same messages. Takes about a minute a bag (zstd
level 19).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
sys.path.insert(1, str(REPO_ROOT / "demo"))  # the demo package (sam3_agent_demo)

from sam3_agent_demo import moving_sample, sample  # noqa: E402

SAMPLES = {"moving": moving_sample.MOVING, "grasp": moving_sample.GRASP}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample", choices=[*SAMPLES, "all"], default="all",
                        help="which bag (default: all)")
    parser.add_argument("--out", type=Path, default=None,
                        help="output directory of one --sample (default: data/<its folder>)")
    args = parser.parse_args(argv)
    chosen = list(SAMPLES.values()) if args.sample == "all" else [SAMPLES[args.sample]]
    if args.out is not None and len(chosen) != 1:
        parser.error("--out needs one --sample (moving or grasp)")
    for spec in chosen:
        started = time.monotonic()
        out = args.out or REPO_ROOT / "data" / spec.dirname
        bag_dir = spec.generate(out)
        size = sample.dir_size(out)
        print(f"wrote {bag_dir} and the ground truth in {out}: {size / 1e6:.2f} MB, "
              f"{time.monotonic() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

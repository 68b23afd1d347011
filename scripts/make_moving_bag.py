#!/usr/bin/env python3
"""Regenerate the moving sample bag and its ground truth (data/sample_moving/, follow mode).

    .venv/bin/python scripts/make_moving_bag.py [--out DIR]

Deterministic: running it again writes the same messages. Takes about a minute (zstd level 19).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from sam3_agent_ros.demo import moving_sample, sample  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "data" / moving_sample.DIRNAME,
                        help=f"output directory (default: data/{moving_sample.DIRNAME})")
    args = parser.parse_args(argv)
    started = time.monotonic()
    bag_dir = moving_sample.generate(args.out)
    size = sample.dir_size(args.out)
    print(f"wrote {bag_dir} and the ground truth in {args.out}: {size / 1e6:.2f} MB, "
          f"{time.monotonic() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

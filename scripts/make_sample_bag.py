#!/usr/bin/env python3
"""Regenerate the bundled sample bag and its ground truth (data/sample_tabletop/).

    .venv/bin/python scripts/make_sample_bag.py [--out DIR]

Deterministic: running it again writes the same messages. Takes about a minute (zstd level 19).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
sys.path.insert(1, str(REPO_ROOT / "demo"))  # the demo package (sam3_agent_demo)

from sam3_agent_demo import sample  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "data" / "sample_tabletop",
                        help="output directory (default: data/sample_tabletop)")
    args = parser.parse_args(argv)
    started = time.monotonic()
    bag_dir = sample.generate_sample(args.out)
    size = sample.dir_size(args.out)
    print(f"wrote {bag_dir} and the ground truth in {args.out}: {size / 1e6:.2f} MB, "
          f"{time.monotonic() - started:.1f} s")
    if size > sample.MAX_SAMPLE_BYTES:
        print(f"error: the sample exceeds {sample.MAX_SAMPLE_BYTES / 1e6:.1f} MB", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

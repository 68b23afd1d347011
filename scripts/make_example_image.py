#!/usr/bin/env python3
"""Write the bundled example image and its ground truth (deterministic: fixed scene and seed).

    python scripts/make_example_image.py [--out-dir data]

Outputs ``example_tabletop.png`` (640x480 RGB) and ``example_tabletop_gt.npz`` (see
``sam3_agent_ros.demo.scene.save_ground_truth``), and prints the objects with their pixel centroids.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import cv2

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sam3_agent_ros.demo.scene import render_scene, save_ground_truth  # noqa: E402

EXAMPLE_SEED = 7
IMAGE_NAME = "example_tabletop.png"
GROUND_TRUTH_NAME = "example_tabletop_gt.npz"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", type=Path,
                        default=Path(__file__).resolve().parents[1] / "data")
    args = parser.parse_args(argv)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    frame = render_scene(seed=EXAMPLE_SEED)
    image_path = args.out_dir / IMAGE_NAME
    if not cv2.imwrite(str(image_path), cv2.cvtColor(frame.rgb, cv2.COLOR_RGB2BGR),
                       [cv2.IMWRITE_PNG_COMPRESSION, 9]):
        print(f"error: could not write {image_path}", file=sys.stderr)
        return 1
    save_ground_truth(frame, args.out_dir / GROUND_TRUTH_NAME)
    print(f"wrote {image_path} and {args.out_dir / GROUND_TRUTH_NAME}")
    for obj in frame.scene.objects:
        u, v = frame.centroid_px(obj.name)
        x, y, z = frame.positions[obj.name]
        print(f"  {obj.name:15s} {obj.color_name:7s} {obj.shape:9s} centroid=({u:6.1f}, {v:6.1f}) "
              f"area={int(frame.masks[obj.name].sum()):5d} xyz=({x:+.3f}, {y:+.3f}, {z:.3f}) m")
    return 0


if __name__ == "__main__":
    sys.exit(main())

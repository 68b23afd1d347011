#!/usr/bin/env python3
"""Write the bundled example image and its ground truth (deterministic: fixed scene and seed).

    python scripts/make_example_image.py [--out-dir data]

Outputs ``example_tabletop.png`` (640x480 RGB), ``example_tabletop_gt.npz`` (see
``sam3_agent_demo.scene.save_ground_truth``), the registered depth as a 16-bit PNG in
millimetres (``example_tabletop_depth.png``) and the colour camera's calibration
(``example_tabletop_camera_info.yaml``, the ROS calibration format): what ``sam3-agent run
--depth`` reads (docs/pick.md). Prints the objects with their pixel centroids.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import cv2

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(1, str(Path(__file__).resolve().parents[1] / "demo"))  # sam3_agent_demo

from sam3_agent_demo.scene import render_scene, save_ground_truth  # noqa: E402

EXAMPLE_SEED = 7
IMAGE_NAME = "example_tabletop.png"
GROUND_TRUTH_NAME = "example_tabletop_gt.npz"
DEPTH_NAME = "example_tabletop_depth.png"
CAMERA_INFO_NAME = "example_tabletop_camera_info.yaml"


def camera_info_yaml(frame) -> str:
    """The colour camera's calibration file (camera_calibration / camera_info_manager format)."""
    k = frame.intrinsics
    matrix = ", ".join(f"{v:g}" for v in k.K.ravel())
    projection = f"{k.fx:g}, 0, {k.cx:g}, 0, 0, {k.fy:g}, {k.cy:g}, 0, 0, 0, 1, 0"
    return (f"image_width: {k.width}\nimage_height: {k.height}\ncamera_name: example_colour\n"
            f"camera_matrix:\n  rows: 3\n  cols: 3\n  data: [{matrix}]\n"
            "distortion_model: plumb_bob\n"
            "distortion_coefficients:\n  rows: 1\n  cols: 5\n  data: [0, 0, 0, 0, 0]\n"
            "rectification_matrix:\n  rows: 3\n  cols: 3\n  data: [1, 0, 0, 0, 1, 0, 0, 0, 1]\n"
            f"projection_matrix:\n  rows: 3\n  cols: 4\n  data: [{projection}]\n")


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
    depth_path = args.out_dir / DEPTH_NAME
    if not cv2.imwrite(str(depth_path), frame.depth_mm(), [cv2.IMWRITE_PNG_COMPRESSION, 9]):
        print(f"error: could not write {depth_path}", file=sys.stderr)
        return 1
    (args.out_dir / CAMERA_INFO_NAME).write_text(camera_info_yaml(frame))
    print(f"wrote {image_path}, {args.out_dir / GROUND_TRUTH_NAME}, {depth_path} and "
          f"{args.out_dir / CAMERA_INFO_NAME}")
    for obj in frame.scene.objects:
        u, v = frame.centroid_px(obj.name)
        x, y, z = frame.positions[obj.name]
        print(f"  {obj.name:15s} {obj.color_name:7s} {obj.shape:9s} centroid=({u:6.1f}, {v:6.1f}) "
              f"area={int(frame.masks[obj.name].sum()):5d} xyz=({x:+.3f}, {y:+.3f}, {z:.3f}) m")
    return 0


if __name__ == "__main__":
    sys.exit(main())

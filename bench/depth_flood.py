"""Memory held by the depth ring under a flood of large depth frames (issue 34, CONTRACTS §11).

The node keeps depth frames by reference for stamp matching. Before ``depth.buffer_mib`` the
ring was bounded by count only (``depth.buffer_size``, 30, settable to 1000): 40 depth frames of
34 MB took a node from 171 to 1183 MB. This runs ``ros/depth.DepthTargets`` in this process on
a fake node (its depth callback called directly, nothing on DDS), feeds it ``--frames`` depth
frames of ``--mib`` MiB each (16UC1, stamped 33 ms apart), and prints this process's VmRSS
before, after the flood, and after ``destroy`` (a lifecycle cycle), side by side:

- ``bounded``: the defaults (``depth.buffer_mib`` 256, ``depth.buffer_size`` 30);
- ``by count``: ``depth.buffer_mib`` at its maximum, ``depth.buffer_size`` 1000 (only the count
  bounds the ring, as before the byte bound existed).

    python bench/depth_flood.py [--frames 40] [--mib 34]
"""

from __future__ import annotations

import argparse
import gc
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def vm_rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def run_one(name: str, frames: int, mib: float) -> None:
    """One configuration in this process; prints one JSON-ish line."""
    import numpy as np
    from sensor_msgs.msg import Image

    from sam3_agent_ros.config import PARAMETERS_BY_NAME, Config
    from sam3_agent_ros.ros.depth import DepthTargets
    from test.ros.test_depth_world import FakeNode

    params = {"depth.enabled": True}
    if name == "by count":
        params.update({"depth.buffer_mib": int(PARAMETERS_BY_NAME["depth.buffer_mib"].max),
                       "depth.buffer_size": 1000})
    config = Config.from_params(params)
    node = FakeNode()
    targets = DepthTargets(node, config.depth, max_pixels=config.node.max_image_pixels)
    on_depth = node.callbacks["depth"]
    width = 4096
    height = max(1, int(mib * 2**20 / (2 * width)))
    payload = np.zeros((height, width), np.uint16).tobytes()
    gc.collect()
    before = vm_rss_mib()
    for k in range(frames):
        msg = Image(height=height, width=width, encoding="16UC1", step=width * 2)
        msg.header.stamp.sec, msg.header.stamp.nanosec = 1000 + k // 30, (k % 30) * 33_333_333
        msg.data = payload  # a new buffer per message, as a subscription gets
        on_depth(msg)
        del msg
    gc.collect()
    flooded = vm_rss_mib()
    kept, kept_mib = len(targets._ring), targets.buffered_bytes / 2**20
    targets.destroy()
    del targets
    gc.collect()
    after = vm_rss_mib()
    print(f"RESULT {name}|{kept}|{kept_mib:.0f}|{before:.0f}|{flooded:.0f}|{after:.0f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=40)
    parser.add_argument("--mib", type=float, default=34.0)
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        run_one(args.one, args.frames, args.mib)
        return 0
    print(f"{args.frames} depth frames of {args.mib:g} MiB, in-process DepthTargets "
          "(each configuration in a fresh process)")
    print(f"{'ring':10} {'frames kept':>11} {'MiB kept':>9} {'RSS before':>11} "
          f"{'after flood':>12} {'after destroy':>14}")
    for name in ("bounded", "by count"):
        proc = subprocess.run([sys.executable, __file__, "--one", name, "--frames",
                               str(args.frames), "--mib", str(args.mib)], cwd=ROOT,
                              capture_output=True, text=True, check=False)
        line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
        if line is None:
            print(f"{name}: failed\n{proc.stderr[-2000:]}")
            return 1
        _, kept, kept_mib, before, flooded, after = line[len("RESULT "):].split("|")
        print(f"{name:10} {kept:>11} {kept_mib:>9} {before + ' MiB':>11} "
              f"{flooded + ' MiB':>12} {after + ' MiB':>14}")
    return 0


if __name__ == "__main__":
    sys.path[:0] = [str(ROOT), str(ROOT / "demo")]
    sys.exit(main())

"""Filter `pip freeze` (stdin) into a constraints file body (stdout): `name==version` for every
installed distribution, sorted, for `pip -c`.

Left out: the bare-name aliases the ROS wheels register beside their `ros-*` distributions
(rclpy next to ros-rclpy; only the ros-* names exist on PyPI), this package itself and pip. Local
version labels are dropped (torch 2.13.0+cpu -> 2.13.0: the CPU and the CUDA build share a pin).
Used by scripts/update_constraints.sh (.venv) and scripts/setup_extra_venv.sh --freeze.
"""

import re
import sys

SKIPPED = {"sam3-agent-ros", "pip"}


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def main() -> None:
    pins = [line.strip().split("==", 1) for line in sys.stdin if "==" in line]
    names = {norm(name) for name, _ in pins}
    for name, version in sorted(pins, key=lambda pin: norm(pin[0])):
        if not norm(name).startswith("ros-") and "ros-" + norm(name) in names:
            continue
        if norm(name) in SKIPPED:
            continue
        print(f"{name}=={version.split('+')[0]}")


if __name__ == "__main__":
    main()

#!/usr/bin/env bash
# `make demo-follow`: the ROS node following objects on the moving sample bag (data/sample_moving/:
# the camera pans, objects move, one leaves the view), offline backends, DDS on loopback. Prints
# per followed query the IoU per frame and its mean, the 3D error and how following ended
# (stopped / lost); writes out/demo_follow/ (overlay PNGs, report.json, node.log). Extra
# arguments go to `sam3-agent demo-follow` (e.g. -p follow.mode:=redetect).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -x .venv/bin/sam3-agent ]; then
    exec .venv/bin/sam3-agent demo-follow --out out/demo_follow "$@"
fi
exec .venv/bin/python -m sam3_agent_ros.cli demo-follow --out out/demo_follow "$@"

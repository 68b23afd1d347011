#!/usr/bin/env bash
# The main job of `make demo`: the ROS node on the bundled sample bag (a synthetic tabletop with
# queries and aligned depth), offline backends, DDS on loopback. Prints each query's result as it
# arrives and a summary against the ground truth; writes out/demo/ (overlay PNGs, output_bag/,
# report.json, node.log). Extra arguments go to `sam3-agent demo` (e.g. --params-file my.yaml).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -x .venv/bin/sam3-agent ]; then
    exec .venv/bin/sam3-agent demo --out out/demo "$@"
fi
exec .venv/bin/python -m sam3_agent_ros.cli demo --out out/demo "$@"

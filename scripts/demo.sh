#!/usr/bin/env bash
# The main job of `make demo`: answer one query on the bundled example image with the offline
# (demo) backends, printing the result JSON and writing out/demo/{overlay,mask}.png.
set -euo pipefail
cd "$(dirname "$0")/.."
exec .venv/bin/sam3-agent run --image data/example_tabletop.png --query "the leftmost blue object" \
    -p llm.backend:=offline -p segmenter.backend:=color --out out/demo

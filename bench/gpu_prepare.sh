#!/usr/bin/env bash
# Fill .whl/ (git-ignored) with what bench/gpu_run.sh needs on the GPU machine (Python 3.12 there).
set -euo pipefail
cd "$(dirname "$0")/.."
SITE=.venv/lib/python3.11/site-packages
mkdir -p .whl/site
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d .whl pycocotools==2.0.11
for package in sam3 iopath ftfy wcwidth; do
    rm -rf ".whl/site/$package"
    cp -r "$SITE/$package" .whl/site/
done
find .whl/site -name __pycache__ -type d -prune -exec rm -rf {} +
cp "$SITE/open_clip/bpe_simple_vocab_16e6.txt.gz" .whl/
du -sh .whl

#!/usr/bin/env bash
# Run every benchmark bench/*.py in name order with the repository's venv (`make bench`).
# Each benchmark prints its own figures; results are written up in docs/benchmarks.md.
set -euo pipefail
cd "$(dirname "$0")/.."
shopt -s nullglob
benchmarks=(bench/*.py)
if [[ ${#benchmarks[@]} -eq 0 ]]; then
    echo "bench: no benchmarks in bench/"
    exit 0
fi
for benchmark in "${benchmarks[@]}"; do
    echo "=== $benchmark"
    .venv/bin/python "$benchmark"
done

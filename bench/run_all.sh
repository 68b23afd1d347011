#!/usr/bin/env bash
# `make bench`: run every benchmark, print the summary table, write docs/benchmarks.md.
#
#   bench/run_all.sh              # everything, SAM 3 on the CPU included (~20 min on 2 cores)
#   bench/run_all.sh --skip-sam3  # reuse the SAM 3 figures recorded in build/bench/ (~7 min)
#
# Each benchmark is also runnable alone (see its docstring); each writes build/bench/NAME.json
# and bench/report.py turns those into the table and the doc (the "SAM 3 latency" GPU section of
# docs/benchmarks.md, outside the generated markers, is kept).
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}  # PY=/path/to/python: another venv
skip_sam3=0
for arg in "$@"; do
    case $arg in
        --skip-sam3) skip_sam3=1 ;;
        *) echo "usage: bench/run_all.sh [--skip-sam3]" >&2; exit 2 ;;
    esac
done
started=$(date +%s)
failed=()
run() {  # name, then the command
    local name=$1
    shift
    echo "=== $name: $*"
    local t0=$(date +%s)
    "$@" || failed+=("$name")
    echo "--- $name: $(( $(date +%s) - t0 )) s"
}
run agent_overhead $PY bench/agent_overhead.py
run context_size $PY bench/context_size.py
run verifier_concurrency $PY bench/verifier_concurrency.py
run node_costs $PY bench/node_costs.py
run segment_action $PY bench/segment_action.py
run action_memory $PY bench/action_memory.py
run answer_memory $PY bench/answer_memory.py
run memory_soak $PY bench/memory_soak.py
run reply_shapes $PY bench/reply_shapes.py
run eval_jobs $PY bench/eval_jobs.py
run follow_node $PY bench/follow_node.py
run box_fit $PY bench/box_fit.py
run tf_cloud $PY bench/tf_cloud.py
run grasp_scene $PY bench/grasp_scene.py
run node_exit $PY bench/node_exit.py --runs 3
run console_cost $PY bench/console_cost.py
run console_flood $PY bench/console_flood.py
run query_burst $PY bench/query_burst.py
run log_floods $PY bench/log_floods.py
run fleet $PY bench/fleet.py
sam3_note=""
if [[ $skip_sam3 -eq 1 ]]; then
    sam3_note=" (SAM 3 skipped: its figures are the ones recorded earlier in build/bench/)"
    echo "=== sam3_latency: skipped (--skip-sam3)"
else
    run sam3_latency $PY bench/sam3_latency.py --device cpu --iterations 1 --prompts 2
fi
# Follow cost per frame; with SAM 3 also one SAM 3 re-detection on the CPU (~2 min).
run follow_cost $PY bench/follow_cost.py $([[ $skip_sam3 -eq 1 ]] || echo --sam3)
# Standing concepts: k concepts in one pass vs k passes; with SAM 3 on the CPU (~6 backbones).
run concepts_batch $PY bench/concepts_batch.py $([[ $skip_sam3 -eq 1 ]] || echo --sam3)
total=$(( $(date +%s) - started ))
echo "=== summary (bench took ${total} s)"
$PY bench/report.py --total-seconds "$total" --sam3-note "$sam3_note"
if [[ ${#failed[@]} -gt 0 ]]; then
    echo "bench: FAILED: ${failed[*]}" >&2
    exit 1
fi

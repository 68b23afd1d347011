#!/usr/bin/env bash
# SAM 3 latency on a lent GPU machine (one call of the workplace's device tool), results in $OUT.
#
# That machine has python3 with CUDA torch, torchvision, timm, triton and huggingface_hub, no
# network. What it lacks travels in .whl/ (git-ignored; prepare it here with bench/gpu_prepare.sh):
#   .whl/pycocotools-*.whl   compiled for cp312 (sam3 imports pycocotools at module level)
#   .whl/site/{sam3,iopath,ftfy,wcwidth}   pure-Python packages copied from .venv
#   .whl/bpe_simple_vocab_16e6.txt.gz      the BPE vocabulary (sha256-checked by the backend)
# Device-tool call: command "bash bench/gpu_run.sh", carry [".whl"], timeout_s 420.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-build/gpu}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
exec > >(tee "$OUT/gpu_run.log") 2>&1

echo "=== machine"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python3 -c "import sys, torch, torchvision, numpy; print(sys.version.split()[0], 'torch',
torch.__version__, 'torchvision', torchvision.__version__, 'numpy', numpy.__version__,
torch.cuda.get_device_name(0), 'bf16', torch.cuda.is_bf16_supported())"

echo "=== install"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site \
    .whl/*.whl || exit 1
export PYTHONPATH="$PWD:$PWD/.whl/site:/tmp/site"
BPE=.whl/bpe_simple_vocab_16e6.txt.gz

run_bench() {  # name, then bench arguments
    local name=$1
    shift
    echo "=== bench $name"
    timeout 130 python3 bench/sam3_latency.py --device cuda --bpe-path "$BPE" \
        --json "$OUT/sam3_latency_$name.json" "$@" || echo "bench $name FAILED ($?)"
}
run_bench bf16 --dtype bfloat16 --iterations 20 --prompts 4
run_bench fp16 --dtype float16 --iterations 10 --prompts 4
run_bench bf16_1080p --dtype bfloat16 --iterations 10 --prompts 4 --width 1920 --height 1080
echo "=== done"

#!/usr/bin/env bash
# SAM 3 latency on a GPU machine, torch and ONNX Runtime (CUDA, TensorRT) side by side; the
# figures (JSON per run + this log) land in $OUT. Under 8 minutes: each step has its timeout.
#
#   1. torch bf16 and onnxruntime with the CUDA provider (fp16 export) in one run: the ratio
#   2. onnxruntime with the TensorRT provider (fp16; builds its engine on the first pass, cached)
#   (GPU_RUN_ALL=1 adds the torch fp16 and 1080p runs of earlier measurements.)
#
# What it needs and installs:
#   - python3 with CUDA torch, torchvision, timm, huggingface_hub (the lent machines have them;
#     no network there): what they lack travels in .whl/ (git-ignored; bench/gpu_prepare.sh):
#       .whl/pycocotools-*.whl, .whl/site/{sam3,iopath,ftfy,wcwidth}, the BPE vocabulary
#   - onnx + onnxscript (for the export) and ONNX Runtime with the CUDA provider: used when
#     python3 has them; else installed from .whl/ (onnxruntime_gpu-*.whl, onnx*-*.whl) or, on a
#     machine with network, from PyPI (onnxruntime-gpu of requirements/onnx.txt, with its CUDA 12
#     and cuDNN wheels: the [cuda,cudnn] extras; the wheel is too big to carry). The TensorRT
#     provider also needs TensorRT's libraries (pip tensorrt-cu12-libs, or the system's).
#     Whatever is missing is said in one line and that step is skipped, never faked.
# Device-tool call: command "bash bench/gpu_run.sh", carry [".whl"], timeout_s 540.
# GPU_RUN_DRY=1: on any machine (a CPU one too), check the steps and print what would run
# (each bench call parses its arguments and exits), without loading SAM 3 (test/test_bench_gpu_run.py).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-build/gpu}
DRY=${GPU_RUN_DRY:-0}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
exec > >(tee "$OUT/gpu_run.log") 2>&1
ENGINE=${GPU_RUN_ENGINE_DIR:-/tmp/sam3_engine_fp16}
BPE=.whl/bpe_simple_vocab_16e6.txt.gz
ORT_GPU=$(sed -n -E 's/^# onnxruntime-gpu==([0-9.]+).*/\1/p' requirements/onnx.txt)
started=$(date +%s)

echo "=== machine ($(date -u +%FT%TZ))"
if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
else
    echo "no nvidia-smi: no GPU here$([[ $DRY == 1 ]] && echo ' (dry run)')"
fi
python3 -c "import sys, torch; print(sys.version.split()[0], 'torch', torch.__version__,
'cuda', torch.cuda.is_available())"

echo "=== install"
if [[ -d .whl ]] && compgen -G ".whl/*.whl" >/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
        --target /tmp/site .whl/*.whl || echo "install from .whl/ FAILED ($?)"
fi
export PYTHONPATH="/tmp/site:$PWD:$PWD/.whl/site${PYTHONPATH:+:$PYTHONPATH}"
[[ -f $BPE ]] || BPE=""  # the backend then finds open_clip's copy, or says what is missing
providers() {
    python3 -c "import onnxruntime as o; print(','.join(o.get_available_providers()))" \
        2>/dev/null
}
if [[ $(providers) != *CUDAExecutionProvider* && $DRY != 1 ]]; then
    echo "onnxruntime with the CUDA provider missing (have: $(providers)); trying PyPI"
    timeout 150 python3 -m pip install -q --no-cache-dir --retries 0 --timeout 10 \
        --target /tmp/site-ort "onnxruntime-gpu[cuda,cudnn]==$ORT_GPU" onnx onnxscript \
        || echo "pip install onnxruntime-gpu==$ORT_GPU FAILED (no network?)"
    export PYTHONPATH="/tmp/site-ort:$PYTHONPATH"
fi
# TensorRT's libraries from a pip install (tensorrt-cu12-libs), if any, for the TensorRT provider
trt_libs=$(python3 -c "import tensorrt_libs, os; print(os.path.dirname(tensorrt_libs.__file__))" \
    2>/dev/null || true)
[[ -n $trt_libs ]] && export LD_LIBRARY_PATH="$trt_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
echo "onnxruntime providers: $(providers || echo 'none: onnxruntime not importable')"

bench() {  # name, timeout, then bench arguments
    local name=$1 limit=$2
    shift 2
    echo "=== bench $name ($(( $(date +%s) - started )) s in)"
    local command=(python3 bench/sam3_latency.py ${BPE:+--bpe-path "$BPE"} \
        --json "$OUT/sam3_latency_$name.json" "$@")
    if [[ $DRY == 1 ]]; then
        "${command[@]}" --dry-run || echo "bench $name: bad arguments ($?)"
    else
        timeout "$limit" "${command[@]}" || echo "bench $name FAILED ($?)"
    fi
}

echo "=== export (fp16, traced on the CPU) into $ENGINE"
export_code="
import dataclasses, sys
from pathlib import Path
from sam3_agent_ros.config import SegmenterConfig
from sam3_agent_ros.segmenters.sam3_engine import export_engine
from sam3_agent_ros.segmenters.sam3_model import load_sam3
cfg = dataclasses.replace(SegmenterConfig(), backend='sam3', random_weights=True, device='cpu',
                          bpe_path=sys.argv[1], engine='onnxruntime')
if sys.argv[3] == '1':
    print('dry run: would export', cfg.engine, 'parts to', sys.argv[2]); sys.exit(0)
print(export_engine(load_sam3(cfg), Path(sys.argv[2]), 'float16').summary())
"
timeout 150 python3 -c "$export_code" "$BPE" "$ENGINE" "$DRY" || echo "export FAILED ($?)"

if [[ $DRY == 1 || $(providers) == *CUDAExecutionProvider* ]]; then
    bench cuda_torch_vs_ort 170 --device cuda --dtype bfloat16 --engines torch,onnxruntime \
        --engine-dir "$ENGINE" --ort-providers cuda --iterations 10 --prompts 4
else
    echo "=== bench cuda_torch_vs_ort skipped: no CUDAExecutionProvider; torch alone:"
    bench torch_bf16 120 --device cuda --dtype bfloat16 --engines torch --iterations 20 \
        --prompts 4
fi
if [[ $DRY == 1 || $(providers) == *TensorrtExecutionProvider* ]]; then
    bench tensorrt_fp16 200 --device cuda --dtype bfloat16 --engines onnxruntime \
        --engine-dir "$ENGINE" --ort-providers tensorrt --iterations 10 --prompts 4
else
    echo "=== bench tensorrt_fp16 skipped: no TensorrtExecutionProvider (TensorRT's libraries" \
        "missing: pip install tensorrt-cu12-libs, or a JetPack build of onnxruntime-gpu)"
fi
if [[ ${GPU_RUN_ALL:-0} == 1 ]]; then
    bench torch_fp16 130 --device cuda --dtype float16 --engines torch --iterations 10 --prompts 4
    bench torch_bf16_1080p 130 --device cuda --dtype bfloat16 --engines torch --iterations 10 \
        --prompts 4 --width 1920 --height 1080
fi
echo "=== done in $(( $(date +%s) - started )) s; figures: $(ls "$OUT" | tr '\n' ' ')"

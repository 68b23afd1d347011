#!/usr/bin/env bash
# Create or update .venv/ at the repository root with the pinned dependencies and this package
# (editable), so that .venv/bin/sam3-agent and .venv/bin/sam3_agent_node exist, plus the package's
# ROS interfaces (action/, msg/) generated into it by scripts/build_interfaces.sh.
#
# Idempotent: does nothing when .venv is up to date with requirements/*, setup.py, demo/setup.py and
# the interface build files (hash stored in .venv/.requirements.sha256); otherwise installs on top
# of the existing venv.
#
# Environment:
#   SAM3_AGENT_CUDA=1             install the CUDA build of torch (GPU machines) instead of CPU torch
#   SAM3_AGENT_TORCH_INDEX_URL=U  package index to take torch from, e.g.
#                                 https://download.pytorch.org/whl/cpu   (CPU wheel, other machines)
#                                 https://download.pytorch.org/whl/cu128 (a specific CUDA build)
#   SAM3_AGENT_PYTHON=python3.11  interpreter for a new venv. The pins of requirements/ are those
#                                 tested on 3.11 (numpy 2.3 and pillow 13 need 3.11+); the ROS
#                                 wheels exist for 3.10-3.13. Other Pythons and ROS 2 Jazzy are
#                                 tested in their own venvs: scripts/setup_extra_venv.sh.
#   SAM3_AGENT_FORCE_SETUP=1      reinstall even when the hash matches
# Switching an existing venv between CPU and CUDA torch: delete .venv first.
set -euo pipefail

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv="$repo_root/.venv"
stamp="$venv/.requirements.sha256"
requirements="$repo_root/requirements"
cuda="${SAM3_AGENT_CUDA:-0}"
torch_index="${SAM3_AGENT_TORCH_INDEX_URL:-}"
started=$(date +%s)

# Two `make` targets started at once must not install into the same venv concurrently.
exec 9<"${BASH_SOURCE[0]}"
if command -v flock >/dev/null; then
    flock 9
fi

wanted_hash=$(
    cd "$repo_root"
    {
        cat requirements/*.txt setup.py demo/setup.py CMakeLists.txt package.xml action/* msg/* \
            interfaces/README.md interfaces/*/CMakeLists.txt interfaces/*/package.xml \
            interfaces/*/msg/*.msg
        echo "cuda=$cuda torch_index=$torch_index"
    } | sha256sum | cut -d' ' -f1
)

entry_points_exist() {
    [[ -x "$venv/bin/sam3-agent" && -x "$venv/bin/sam3_agent_node" ]]
}

if [[ "${SAM3_AGENT_FORCE_SETUP:-0}" != 1 && -x "$venv/bin/python" && -f "$stamp" ]] \
    && [[ "$(cat "$stamp")" == "$wanted_hash" ]] && entry_points_exist; then
    echo "setup: .venv is up to date ($("$venv/bin/python" --version 2>&1), $([[ $cuda == 1 ]] && echo CUDA || echo CPU) torch)"
    # The generated interfaces live outside pip's view (a reinstall of the package clears them):
    # the script checks they still import and rebuilds them only when they do not (cached).
    exec "$repo_root/scripts/build_interfaces.sh" "$venv"
fi

if [[ ! -x "$venv/bin/python" ]]; then
    python="${SAM3_AGENT_PYTHON:-$(command -v python3.11 || command -v python3 || true)}"
    if [[ -z "$python" ]]; then
        echo "setup: no python3.11 found; set SAM3_AGENT_PYTHON" >&2
        exit 1
    fi
    version=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    if [[ "$version" != 3.11 && -z "${SAM3_AGENT_PYTHON:-}" ]]; then
        echo "setup: $python is Python $version; requirements/ pins what is tested on 3.11" \
            "(set SAM3_AGENT_PYTHON to try another)" >&2
        exit 1
    fi
    echo "setup: creating .venv with $python (Python $version)"
    "$python" -m venv "$venv"
fi

pip_install() {
    # Quiet, minus this kind of machine's warnings about index directories that do not exist.
    "$venv/bin/python" -m pip --disable-pip-version-check install --quiet --no-input "$@" \
        2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
}
constraints=(-c "$requirements/constraints.txt")

if [[ "$cuda" == 1 ]]; then
    # A CPU build already installed satisfies torch==2.13.0 too: remove it first.
    if "$venv/bin/python" -c 'import importlib.metadata as m, sys; sys.exit("+cpu" not in m.version("torch"))' 2>/dev/null; then
        "$venv/bin/python" -m pip uninstall --quiet -y torch
    fi
    # PyPI's Linux torch wheel is the CUDA build. `===` matches the version string exactly, so the
    # local CPU wheel (2.13.0+cpu) of a find-links directory cannot satisfy it; with an index URL
    # (whose builds carry +cuXXX) the ordinary `==` is used.
    torch_version=$(grep -E '^torch==' "$requirements/sam3-cpu.txt" | cut -d= -f3)
    torchvision_version=$(grep -E '^torchvision==' "$requirements/sam3-nodeps.txt" | cut -d= -f3)
    if [[ -n "$torch_index" ]]; then
        pip_install "${constraints[@]}" --index-url "$torch_index" \
            "torch==$torch_version" "torchvision==$torchvision_version"
    else
        pip_install "${constraints[@]}" "torch===$torch_version" \
            "torchvision===$torchvision_version"
    fi
    grep -v -E '^torch==' "$requirements/sam3-cpu.txt" > "$venv/.sam3-cpu-without-torch.txt"
    torch_requirements=(-r "$venv/.sam3-cpu-without-torch.txt")
    # ONNX Runtime with the CUDA and TensorRT providers instead of the CPU build (one or the
    # other: both install the onnxruntime module).
    ort_gpu=$(sed -n -E 's/^# (onnxruntime-gpu==[0-9.]+).*/\1/p' "$requirements/onnx.txt")
    if "$venv/bin/python" -m pip show onnxruntime >/dev/null 2>&1; then
        "$venv/bin/python" -m pip uninstall --quiet -y onnxruntime
    fi
    sed -E "s/^onnxruntime==.*/$ort_gpu/" "$requirements/onnx.txt" > "$venv/.onnx-gpu.txt"
    onnx_requirements=(-r "$venv/.onnx-gpu.txt")
else
    torch_requirements=(-r "$requirements/sam3-cpu.txt")
    onnx_requirements=(-r "$requirements/onnx.txt")
    if [[ -n "$torch_index" ]]; then
        torch_requirements+=(--extra-index-url "$torch_index")
    fi
fi

# 1. Everything that is installed with its dependencies (pinned, transitive ones constrained;
#    the constraints also hold typing_extensions and tqdm where sam3 0.1.4 needs them).
pip_install "${constraints[@]}" \
    -r "$requirements/base.txt" "${torch_requirements[@]}" "${onnx_requirements[@]}" \
    -r "$requirements/dev.txt"
# 2. sam3, timm, torchvision, open_clip_torch WITHOUT dependencies (they would pull CUDA torch).
pip_install --no-deps "${constraints[@]}" -r "$requirements/sam3-nodeps.txt"
# 3. This package, editable: source edits apply without reinstalling.
pip_install --no-deps --no-build-isolation -e "$repo_root"
# 3b. The demo package (demo/: scenes, sample bags, scoring, the demos, the node-process harness
#     of the tests), editable: `sam3-agent demo` and the suite use it; a robot never gets it.
pip_install --no-deps --no-build-isolation -e "$repo_root/demo"
# 4. The ROS interfaces (action/, msg/) generated into the venv (cached; after 3, which clears them).
"$repo_root/scripts/build_interfaces.sh" "$venv"

if ! entry_points_exist; then
    echo "setup: .venv/bin/sam3-agent or .venv/bin/sam3_agent_node missing after install" >&2
    exit 1
fi
echo "$wanted_hash" > "$stamp"
torch_version=$("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("torch"))')
echo "setup: .venv ready in $(($(date +%s) - started)) s (torch $torch_version," \
    "$("$venv/bin/python" --version 2>&1), $(du -sh "$venv" | cut -f1))"

#!/usr/bin/env bash
# Create or update one of the extra test venvs at the repository root, beside the main .venv:
#
#   scripts/setup_extra_venv.sh py310    .venv-py310: Python 3.10, ROS-free runtime + pytest
#   scripts/setup_extra_venv.sh py313    .venv-py313: Python 3.13, ROS-free runtime + pytest
#   scripts/setup_extra_venv.sh jazzy    .venv-jazzy: Python 3.12, ROS 2 Jazzy wheels (rclpy 7.x,
#                                        Fast DDS 2.14) + the ROS-free runtime + pytest + rosbags
#
# `make test` runs them (make setup-extra); see docs/distros.md. No torch and no SAM 3 in any of
# them: the real SAM 3 backend is tested in the main .venv only.
#
# Requirements: requirements/extra-venvs/{core,tests}.txt (+ jazzy.txt), pinned exactly by
# requirements/extra-venvs/constraints-<name>.txt. Idempotent: does nothing when the venv's stamp
# (.requirements.sha256: hash of those files, setup.py and the interpreter version)
# matches. This package and demo/ (sam3_agent_demo) are installed editable, so
# .venv-<name>/bin/sam3-agent exists and runs the demos.
#
#   --freeze   resolve without the constraints file, then rewrite it from what got installed
#              (after changing a requirements file; check that the tests pass, then commit it)
#
# Environment:
#   SAM3_AGENT_EXTRA_PYTHON=/path/to/python3.X   interpreter for a new venv (default: python3.X
#                                               on PATH, else pyenv's newest 3.X)
#   SAM3_AGENT_FORCE_SETUP=1                     reinstall even when the stamp matches
set -euo pipefail

usage() {
    echo "usage: $0 {py310|py313|jazzy} [--freeze]" >&2
    exit 2
}
[[ $# -ge 1 && $# -le 2 ]] || usage
name=$1
freeze=0
if [[ $# -eq 2 ]]; then
    [[ "$2" == --freeze ]] || usage
    freeze=1
fi

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
requirements="$repo_root/requirements/extra-venvs"
case "$name" in
    py310) python_version=3.10; lists=(core.txt tests.txt) ;;
    py313) python_version=3.13; lists=(core.txt tests.txt) ;;
    jazzy) python_version=3.12; lists=(core.txt tests.txt jazzy.txt) ;;
    *) usage ;;
esac
venv="$repo_root/.venv-$name"
stamp="$venv/.requirements.sha256"
constraints="$requirements/constraints-$name.txt"
started=$(date +%s)
# A ROS wheel's .pth re-executes Python once with this set; another venv's must not leak in.
unset _ROS_WHEELS_BOOTSTRAP_COMPLETE

# Two `make` runs at once must not install into the same venv concurrently.
mkdir -p "$venv"
exec 9>"$venv/.setup.lock"
if command -v flock >/dev/null; then
    flock 9
fi

requirements_hash() {
    (
        cd "$repo_root"
        for list in "${lists[@]}"; do cat "requirements/extra-venvs/$list"; done
        cat "$constraints" 2>/dev/null || true
        cat setup.py demo/setup.py scripts/setup_extra_venv.sh
        echo "python=$python_version"
    ) | sha256sum | cut -d' ' -f1
}
wanted_hash=$(requirements_hash)
entry_points_exist() {
    [[ -x "$venv/bin/sam3-agent" && -x "$venv/bin/sam3_agent_node" ]]
}
build_interfaces() {
    # The package's action/msg interfaces, generated with the Jazzy rosidl into this venv
    # (cached by the script itself: it rebuilds when action/, msg/ or CMakeLists.txt change).
    if [[ $name == jazzy && -x "$repo_root/scripts/build_interfaces.sh" ]]; then
        "$repo_root/scripts/build_interfaces.sh" "$venv"
    fi
}
if [[ $freeze == 0 && "${SAM3_AGENT_FORCE_SETUP:-0}" != 1 && -x "$venv/bin/python" \
    && -f "$stamp" && "$(cat "$stamp")" == "$wanted_hash" ]] && entry_points_exist; then
    build_interfaces
    echo "setup: .venv-$name is up to date ($("$venv/bin/python" --version 2>&1))"
    exit 0
fi

# The interpreter: explicit, else python3.X on PATH (a pyenv shim counts only if it runs),
# else the newest pyenv-installed 3.X.
find_python() {
    local candidate
    if [[ -n "${SAM3_AGENT_EXTRA_PYTHON:-}" ]]; then
        echo "$SAM3_AGENT_EXTRA_PYTHON"
        return
    fi
    candidate=$(command -v "python$python_version" || true)
    if [[ -n "$candidate" ]] && "$candidate" -c '' 2>/dev/null; then
        echo "$candidate"
        return
    fi
    if command -v pyenv >/dev/null; then
        for candidate in $(ls -d "$(pyenv root)/versions/$python_version".* 2>/dev/null \
            | sort -V -r); do
            if [[ -x "$candidate/bin/python$python_version" ]]; then
                echo "$candidate/bin/python$python_version"
                return
            fi
        done
    fi
}

if [[ ! -x "$venv/bin/python" ]]; then
    python=$(find_python)
    if [[ -z "$python" ]]; then
        echo "setup: no Python $python_version found (not on PATH, not in pyenv);" \
            "install it or set SAM3_AGENT_EXTRA_PYTHON" >&2
        exit 1
    fi
    version=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    if [[ "$version" != "$python_version" ]]; then
        echo "setup: $python is Python $version, .venv-$name needs $python_version" >&2
        exit 1
    fi
    echo "setup: creating .venv-$name with $python (Python $version)"
    "$python" -m venv "$venv"
    # colcon skips hidden folders already; this makes it explicit for any other crawler.
    touch "$venv/COLCON_IGNORE"
fi

pip_install() {
    "$venv/bin/python" -m pip --disable-pip-version-check install --quiet --no-input "$@" \
        2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
}
requirement_args=()
for list in "${lists[@]}"; do requirement_args+=(-r "$requirements/$list"); done
if [[ $freeze == 1 ]]; then
    pip_install "${requirement_args[@]}"
else
    if [[ ! -f "$constraints" ]]; then
        echo "setup: $constraints missing; create it with: $0 $name --freeze" >&2
        exit 1
    fi
    pip_install -c "$constraints" "${requirement_args[@]}"
fi
pip_install --no-deps --no-build-isolation -e "$repo_root"
# The demo package: the Jazzy venv runs `sam3-agent demo`, and every venv's tests use its scenes,
# samples and scoring (pytest --ros-free collects those too).
pip_install --no-deps --no-build-isolation -e "$repo_root/demo"
if ! entry_points_exist; then
    echo "setup: .venv-$name/bin/sam3-agent or sam3_agent_node missing after install" >&2
    exit 1
fi

build_interfaces

if [[ $freeze == 1 ]]; then
    {
        echo "# Exact versions of everything in .venv-$name (Python $python_version), transitive"
        echo "# dependencies included. Generated by: scripts/setup_extra_venv.sh $name --freeze"
        "$venv/bin/python" -m pip freeze --all --exclude-editable 2>/dev/null \
            | "$venv/bin/python" "$repo_root/scripts/freeze_pins.py"
    } > "$constraints"
    echo "setup: wrote $constraints ($(grep -c '==' "$constraints") pins)"
    wanted_hash=$(requirements_hash)  # the stamp covers the constraints file, which changed
fi

echo "$wanted_hash" > "$stamp"
echo "setup: .venv-$name ready in $(($(date +%s) - started)) s" \
    "($("$venv/bin/python" --version 2>&1), $(du -sh "$venv" | cut -f1))"

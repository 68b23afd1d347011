#!/usr/bin/env bash
# Generate this package's ROS 2 interfaces (action/Segment.action; msg/MaskInfo.msg,
# ConceptDetection.msg, ConceptDetections.msg) and install them into a venv that has the ROS 2
# wheels from PyPI, so that its python imports `sam3_agent_ros.action.Segment` with no sourcing.
# First, where the venv lacks them (no PyPI wheel), the standard message packages the node uses:
# interfaces/vision_msgs, tf2_msgs, shape_msgs, object_recognition_msgs and moveit_msgs
# (wire-identical copies, see interfaces/README.md), built only where `import <pkg>.msg` fails or
# where the installed one is our own copy.
# Usage: scripts/build_interfaces.sh VENV
#
# - Works for the ros-kilted-* and ros-jazzy-* wheels (taken from the rclpy wheel installed in
#   VENV); installs the build-time wheels pinned in requirements/interfaces-<distro>.txt.
# - Idempotent and cached: does nothing when the interface files, the build files and the
#   installed wheels are unchanged (hash in VENV/.interfaces.sha256) and the import works.
# - cmake builds CMakeLists.txt with SAM3_AGENT_INTERFACES_ONLY=ON straight into the venv prefix;
#   the Python package itself stays the editable install of setup.py (scripts/setup_venv.sh).
# Facts behind the steps: ../shared/ENVIRONMENT.md "Custom interfaces"; docs/ros.md "Build layout".
# Environment: SAM3_AGENT_FORCE_INTERFACES=1 rebuilds even when the hash matches.
set -euo pipefail

if [[ $# -ne 1 ]]; then
    echo "usage: $0 VENV" >&2
    exit 2
fi
repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv=$(cd "$1" && pwd)
python="$venv/bin/python"
stamp="$venv/.interfaces.sha256"
# One build folder per checkout: a CMake cache is tied to its source folder, and two checkouts
# (a worktree, a moved clone) may build into the same venv.
checkout=$(printf '%s' "$repo_root" | sha256sum | cut -c1-8)
build_dir="$venv/.build/sam3_agent_ros_interfaces-$checkout"
started=$(date +%s)

if [[ ! -x "$python" ]]; then
    echo "interfaces: $python not found (create the venv first)" >&2
    exit 1
fi
distro=$("$python" - <<'PY'
import importlib.metadata as m
names = [d.metadata["Name"] for d in m.distributions()]
found = sorted({n.split("-")[1] for n in names if n and n.startswith("ros-") and n.endswith("-rclpy")
                and n.count("-") == 2})
print(found[0] if len(found) == 1 else "")
PY
)
if [[ -z "$distro" ]]; then
    echo "interfaces: no single ros-<distro>-rclpy wheel in $venv (install the runtime first)" >&2
    exit 1
fi
pins="$repo_root/requirements/interfaces-$distro.txt"
if [[ ! -f "$pins" ]]; then
    echo "interfaces: no $pins (ROS 2 $distro is not supported by this script)" >&2
    exit 1
fi

standard_packages=(vision_msgs tf2_msgs shape_msgs object_recognition_msgs moveit_msgs)  # in order
imports_ok() {
    (cd / && "$python" -c 'from sam3_agent_ros.action import Segment
from sam3_agent_ros.msg import ConceptDetections, MaskInfo
from vision_msgs.msg import Detection2DArray, Detection3DArray
from tf2_msgs.msg import TFMessage
from moveit_msgs.msg import CollisionObject' 2>/dev/null)
}
# True where the venv needs our copy of a standard package: it does not import, or the one that
# imports is our own copy (marker file installed by interfaces/<pkg>/CMakeLists.txt).
needs_copy() {
    [[ -f "$venv/share/$1/sam3_agent_ros_copy.md" ]] \
        || ! (cd / && "$python" -c "import $1.msg" 2>/dev/null)
}
wanted_hash=$(
    cd "$repo_root"
    {
        cat action/*.action msg/*.msg CMakeLists.txt package.xml "$pins" "${BASH_SOURCE[0]}"
        cat interfaces/README.md interfaces/*/CMakeLists.txt interfaces/*/package.xml \
            interfaces/*/msg/*.msg
        "$python" --version
    } | sha256sum | cut -d' ' -f1
)
if [[ "${SAM3_AGENT_FORCE_INTERFACES:-0}" != 1 && -f "$stamp" && "$(cat "$stamp")" == "$wanted_hash" ]] \
    && imports_ok; then
    echo "interfaces: up to date in $venv (ROS 2 $distro)"
    exit 0
fi

# 1. The generators and CMake packages the runtime wheels do not bring (pinned).
#    requirements/constraints.txt pins the Kilted .venv (transitive wheels included); other
#    distros share some wheel names (ros-ament-cmake-core...) with other versions.
constraints=()
if [[ "$distro" == kilted ]]; then
    constraints=(-c "$repo_root/requirements/constraints.txt")
fi
"$python" -m pip --disable-pip-version-check install --quiet --no-input "${constraints[@]}" \
    -r "$pins" \
    2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)

# 2. The wheels' generator_py exports name the include dirs of the machine that built them:
#    point them at this venv's Python headers and numpy.
"$python" - "$venv" <<'PY'
import glob, re, sys, sysconfig
import numpy
venv = sys.argv[1]
python_include, numpy_include = sysconfig.get_paths()["include"], numpy.get_include()
for path in glob.glob(f"{venv}/share/*/cmake/*__rosidl_generator_pyExport.cmake"):
    text = open(path).read()
    fixed = re.sub(r'[^";]*/numpy/_core/include', numpy_include, text)
    fixed = re.sub(r'[^";]*/include/python3\.\d+', python_include, fixed)
    if fixed != text:
        open(path, "w").write(fixed)
PY

export CMAKE_PREFIX_PATH="$venv" AMENT_PREFIX_PATH="$venv"
# One interface package: configure, build, install into the venv prefix (log in LOG).
build_package() {
    local source=$1 build=$2
    shift 2
    mkdir -p "$build"
    cmake -S "$source" -B "$build" "$@" -DBUILD_TESTING=OFF \
        -DCMAKE_INSTALL_PREFIX="$venv" -DPython3_EXECUTABLE="$python" \
        -DCMAKE_BUILD_TYPE=Release --log-level=WARNING >"$build.log" 2>&1 \
        || { tail -30 "$build.log" >&2; exit 1; }
    cmake --build "$build" -j "$(nproc)" >>"$build.log" 2>&1 \
        || { tail -30 "$build.log" >&2; exit 1; }
    cmake --install "$build" >>"$build.log" 2>&1 || { tail -30 "$build.log" >&2; exit 1; }
}

# 3. The standard message packages the venv lacks (before ours, which may depend on them).
copies=()
for package in "${standard_packages[@]}"; do
    if needs_copy "$package"; then
        build_package "$repo_root/interfaces/$package" "$venv/.build/$package-$checkout"
        copies+=("$package")
    fi
done

# 4. This package's interfaces: generate, compile and install into the venv prefix.
build_package "$repo_root" "$build_dir" -DSAM3_AGENT_INTERFACES_ONLY=ON

# 5. The generated modules sit in site-packages/sam3_agent_ros/{action,msg}; rosidl also writes an
#    __init__.py there, which would hide the editable source package: remove it (the source
#    package's __init__ merges the two folders with pkgutil.extend_path).
site=$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
rm -f "$site/sam3_agent_ros/__init__.py"
rm -rf "$site/sam3_agent_ros/__pycache__"

if ! imports_ok; then
    echo "interfaces: built, but the imports fail (logs: $venv/.build/*.log)" >&2
    (cd / && "$python" -c 'from sam3_agent_ros.action import Segment
from vision_msgs.msg import Detection2DArray
from tf2_msgs.msg import TFMessage
from moveit_msgs.msg import CollisionObject') || true
    exit 1
fi
echo "$wanted_hash" > "$stamp"
echo "interfaces: sam3_agent_ros.action (Segment) and .msg (MaskInfo, ConceptDetection(s))" \
    "${copies[*]:+and our copies of ${copies[*]} }installed in $venv (ROS 2 $distro)" \
    "in $(($(date +%s) - started)) s"

#!/usr/bin/env python3
"""Check that every third-party import of the package has its rosdep key in package.xml.

    python3 scripts/check_import_keys.py

``rosdep install`` installs what package.xml names, nothing else: an import without a key works
in a venv (pip installed it) and dies on a colcon install with ``ModuleNotFoundError``
(``transforms3d`` and ``aiohttp`` did). This walks the installed code (``sam3_agent_ros/`` and
``launch/``) with ``ast``, takes the top-level module of every absolute import (lazy ones inside
functions too), leaves out the standard library and the package itself, and maps each module to
its rosdep key:

- ``PIP_KEYS``: Python distributions (module -> key of rosdep/python.yaml);
- ROS packages: the module is the package (``rclpy``, ``*_msgs``, ``*_srvs``, ``*_interfaces``,
  ``ROS_PACKAGES``), but for ``ROS_RENAMED`` (``tf2_ros`` comes from ``tf2_ros_py``);
- ``OPTIONAL``: imported only for an optional feature, installed by hand (README), each with why.

Exit status 1, with the imports and their files, when an import has no key (or its key is not an
exec dependency of package.xml), or an ``OPTIONAL`` entry is imported nowhere (stale). That the
keys resolve is scripts/check_rosdep_keys.py's check (against a rosdistro checkout).
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "sam3_agent_ros"
SCANNED = ("sam3_agent_ros", "launch")  # what colcon installs that runs
RUNTIME_TAGS = ("depend", "exec_depend")

PIP_KEYS = {
    "aiohttp": "python3-aiohttp",  # sam3-agent console
    "cv2": "python3-opencv",
    "numpy": "python3-numpy",
    "openai": "python3-openai-pip",  # see the comment in package.xml
    "transforms3d": "python3-transforms3d",  # frames/transform.py
    "yaml": "python3-yaml",
}
ROS_PACKAGES = frozenset({"rclpy", "launch", "launch_ros", "ament_index_python", "tf2_ros"})
ROS_RENAMED = {"tf2_ros": "tf2_ros_py"}  # module -> the ROS package that installs it
ROS_INTERFACES = re.compile(r"^[a-z][a-z0-9_]*_(msgs|srvs|interfaces)$")
OPTIONAL = {
    "torch": "segmenter.backend sam3 only: installed with pip for the machine's CUDA (README)",
    "sam3": "segmenter.backend sam3 only: Meta's package, installed with pip (README)",
    "huggingface_hub": "downloading SAM 3 weights (segmenter.backend sam3): pip, with sam3",
    "safetensors": "loading SAM 3 weights (segmenter.backend sam3): pip, with sam3",
    "onnx": "segmenter.engine onnxruntime only (the export): pip, requirements/onnx.txt",
    "onnxruntime": "segmenter.engine onnxruntime only: pip (onnxruntime-gpu on a GPU, the "
                   "JetPack wheel on a Jetson), requirements/onnx.txt",
    "psutil": "SAM 3's memory report only, which falls back to the resource module",
    "rosbags": "the bag commands (replay, record, concepts --bag): key python3-rosbags-pip, "
               "optional (package.xml comment)",
    "sam3_agent_demo": "the demos' own package (demo/): never deployed; cli.py says how to get "
                       "it",
}


def third_party_imports(root: Path = ROOT, scanned: tuple[str, ...] = SCANNED,
                        package: str = PACKAGE) -> dict[str, list[str]]:
    """Top-level module -> the files (relative to ``root``) importing it, for every absolute
    import of the ``.py`` files under ``scanned`` that is neither the standard library nor
    ``package``."""
    found: dict[str, set[str]] = {}
    for folder in scanned:
        for path in sorted((root / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    modules = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    modules = [node.module]
                else:
                    continue
                for module in modules:
                    top = module.split(".")[0]
                    if top in sys.stdlib_module_names or top in ("__future__", package):
                        continue
                    found.setdefault(top, set()).add(str(path.relative_to(root)))
    return {module: sorted(files) for module, files in sorted(found.items())}


def rosdep_key(module: str) -> str | None:
    """The rosdep key that installs ``module``, or None when none is known."""
    if module in PIP_KEYS:
        return PIP_KEYS[module]
    if module in ROS_PACKAGES or ROS_INTERFACES.match(module):
        return ROS_RENAMED.get(module, module)
    return None


def runtime_keys(package_xml: Path) -> set[str]:
    """The keys of package.xml that ``rosdep install`` installs for running the package."""
    root = ET.parse(package_xml).getroot()
    return {element.text.strip() for element in root
            if element.tag in RUNTIME_TAGS and element.text and element.text.strip()}


def problems(imports: dict[str, list[str]], keys: set[str]) -> list[str]:
    """What is wrong: an import without a known key, a key missing from package.xml, a stale
    ``OPTIONAL`` entry."""
    out = []
    for module, files in imports.items():
        where = ", ".join(files[:3]) + (f" and {len(files) - 3} more" if len(files) > 3 else "")
        if module in OPTIONAL:
            continue
        key = rosdep_key(module)
        if key is None:
            out.append(f"import {module} ({where}): no rosdep key known; add its key to "
                       "package.xml and PIP_KEYS here, or to OPTIONAL with why")
        elif key not in keys:
            out.append(f"import {module} ({where}): package.xml has no <exec_depend>{key}"
                       "</exec_depend> (rosdep install would leave it out)")
    out.extend(f"OPTIONAL lists {module}, which nothing imports any more"
               for module in OPTIONAL if module not in imports)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="the repository to check")
    args = parser.parse_args(argv)
    imports = third_party_imports(args.root)
    found = problems(imports, runtime_keys(args.root / "package.xml"))
    for module in imports:
        shown = "optional" if module in OPTIONAL else rosdep_key(module) or "NO KEY"
        print(f"{module:20} {shown}")
    for problem in found:
        print(f"ERROR: {problem}", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())

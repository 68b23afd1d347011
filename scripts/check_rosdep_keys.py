#!/usr/bin/env python3
"""Check the dependency keys of package.xml against a checkout of the rosdep database.

    git clone --depth 1 https://github.com/ros/rosdistro /tmp/rosdistro
    python3 scripts/check_rosdep_keys.py /tmp/rosdistro

For every <*depend> key of package.xml it prints how `rosdep install` resolves it on the Ubuntu
releases of the ROS 2 distributions we document (Humble: jammy, Jazzy and Kilted: noble): an apt
package, a pip package, or a ROS package released in that distribution. Exit status 1 when a key
resolves nowhere (rosdep would stop with "Cannot locate rosdep definition"), 2 for bad usage.
No network, no rosdep installation: it reads rosdep/*.yaml and <distro>/distribution.yaml.
"""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import yaml

DISTROS = {"humble": "jammy", "jazzy": "noble", "kilted": "noble"}
DEPEND_TAGS = ("depend", "build_depend", "buildtool_depend", "exec_depend", "test_depend",
               "build_export_depend")


def package_keys(package_xml: Path) -> list[str]:
    """The dependency keys of a package.xml, in file order, without repeats."""
    root = ET.parse(package_xml).getroot()
    keys: list[str] = []
    for element in root:
        if element.tag in DEPEND_TAGS and element.text and element.text.strip() not in keys:
            keys.append(element.text.strip())
    return keys


def load_rosdep_rules(rosdistro: Path) -> dict:
    """Every rule of rosdep/*.yaml (base.yaml, python.yaml, ...) merged by key."""
    rules: dict = {}
    for path in sorted((rosdistro / "rosdep").glob("*.yaml")):
        rules.update(yaml.safe_load(path.read_text()) or {})
    return rules


def released_packages(rosdistro: Path, distro: str) -> dict[str, str]:
    """ROS package name -> release version in ``<distro>/distribution.yaml``."""
    data = yaml.safe_load((rosdistro / distro / "distribution.yaml").read_text())
    released: dict[str, str] = {}
    for name, repository in (data.get("repositories") or {}).items():
        release = repository.get("release") or {}
        if not release:
            continue
        for package in release.get("packages") or [name]:
            released[package] = str(release.get("version", "?"))
    return released


def _describe(value) -> str | None:
    """An installer entry of a rule: apt list, {pip: {packages}}, or None (not available)."""
    if value is None:
        return None
    if isinstance(value, list):
        return "apt " + " ".join(map(str, value)) if value else None
    if isinstance(value, dict):
        if "pip" in value:
            return "pip " + " ".join(value["pip"].get("packages", []))
        if "apt" in value:
            return "apt " + " ".join(value["apt"].get("packages", []))
    return None


def resolve_on_ubuntu(rule, codename: str) -> str | None:
    """How a rosdep rule installs on Ubuntu ``codename``; None when it does not."""
    if not isinstance(rule, dict):
        return None
    entry = rule.get("ubuntu", rule.get("*"))
    if isinstance(entry, dict) and not ({"pip", "apt"} & set(entry)):
        entry = entry[codename] if codename in entry else entry.get("*")
    return _describe(entry)


def resolve(key: str, rules: dict, released: dict[str, dict[str, str]]) -> dict[str, str | None]:
    """distro -> how ``key`` installs there (None: rosdep cannot resolve it)."""
    out: dict[str, str | None] = {}
    for distro, codename in DISTROS.items():
        if key in released[distro]:
            out[distro] = f"ROS package {released[distro][key]}"
        elif key in rules:
            out[distro] = resolve_on_ubuntu(rules[key], codename)
        else:
            out[distro] = None
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("rosdistro", type=Path, help="checkout of github.com/ros/rosdistro")
    parser.add_argument("--package-xml", type=Path,
                        default=Path(__file__).resolve().parents[1] / "package.xml")
    args = parser.parse_args(argv)
    if not (args.rosdistro / "rosdep").is_dir():
        parser.error(f"{args.rosdistro} has no rosdep/ folder: not a rosdistro checkout")
    rules = load_rosdep_rules(args.rosdistro)
    released = {distro: released_packages(args.rosdistro, distro) for distro in DISTROS}
    unresolved = []
    for key in package_keys(args.package_xml):
        where = resolve(key, rules, released)
        cells = "; ".join(f"{distro} ({DISTROS[distro]}): {how or 'NOT RESOLVED'}"
                          for distro, how in where.items())
        print(f"{key}: {cells}")
        unresolved += [f"{key} on {distro}" for distro, how in where.items() if how is None]
    if unresolved:
        print("unresolved: " + ", ".join(unresolved), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

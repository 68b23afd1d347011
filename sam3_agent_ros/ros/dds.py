"""Environment that keeps DDS traffic on this host (the CLI verbs' ``--loopback``, tests, demos).

By default Fast DDS announces every participant by multicast on every network interface. Anything
we start ourselves must instead stay on loopback:

- ``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST`` and an explicit ``ROS_DOMAIN_ID`` (unless one is
  exported: a random one; the tests and demos, which start nodes, reserve one that no other run on
  this host holds, ``sam3_agent_demo.domains``);
- the Fast DDS profile ``config/fastdds_loopback.xml`` (shared memory with 64 MiB segments plus
  UDPv4 limited to 127.0.0.1, builtin transports off), under the variable name the installed Fast
  DDS reads: ``FASTDDS_DEFAULT_PROFILES_FILE`` for Fast DDS 3.x (Kilted and later; it also reads
  the old name, with a deprecation WARN), ``FASTRTPS_DEFAULT_PROFILES_FILE`` for Fast DDS 2.x
  (Humble, Jazzy; it ignores the new name, which would silently leave the default transports:
  multicast on every interface, 512 KB shared-memory segments). The version is read from the
  install without importing rclpy (``fastdds_major_version``); when it cannot be told, both names
  are set.

Pure Python: this module does not import rclpy. Apply the environment BEFORE ``rclpy.init()`` (Fast
DDS reads it when the first participant is created) or pass it to a subprocess.
"""

from __future__ import annotations

import os
import random
import re
import sys
from collections.abc import Iterable, Mapping, MutableMapping
from pathlib import Path

PACKAGE_NAME = "sam3_agent_ros"
LOOPBACK_PROFILE = "fastdds_loopback.xml"
LARGE_IMAGES_PROFILE = "fastdds_large_images.xml"

# Fast DDS maps a domain to UDP ports 7400 + 250 * domain_id + small offsets; ids above 232 overflow
# the 16-bit port range. We draw from a band well away from the default domain 0.
MAX_DOMAIN_ID = 232
RANDOM_DOMAIN_RANGE = (100, 200)

DISCOVERY_RANGE_VAR = "ROS_AUTOMATIC_DISCOVERY_RANGE"
DOMAIN_ID_VAR = "ROS_DOMAIN_ID"
PROFILES_FILE_VAR = "FASTDDS_DEFAULT_PROFILES_FILE"  # Fast DDS 3.x (Kilted and later)
LEGACY_PROFILES_FILE_VAR = "FASTRTPS_DEFAULT_PROFILES_FILE"  # Fast DDS 2.x (Humble, Jazzy)
PROFILES_FILE_VARS = (PROFILES_FILE_VAR, LEGACY_PROFILES_FILE_VAR)
# The variable each Fast DDS major version reads (unknown version: both).
PROFILES_FILE_VARS_BY_MAJOR: dict[int | None, tuple[str, ...]] = {
    3: (PROFILES_FILE_VAR,), 2: (LEGACY_PROFILES_FILE_VAR,)}
# Fast DDS 3 installs as the CMake package ``fastdds``, Fast DDS 2 as ``fastrtps``; the PyPI wheels
# are the distributions ``ros-fastdds`` / ``ros-fastrtps``.
FASTDDS_PACKAGES = ("fastdds", "fastrtps")
INSTALLED = -1  # ``fastdds_major`` argument: the version installed here (fastdds_major_version)
_VERSION_LINE = re.compile(r'set\(PACKAGE_VERSION\s+"(\d+)\.')


def config_file_candidates(name: str) -> list[Path]:
    """Places a file of ``config/`` can be, most specific first.

    The source tree comes first so that an editable install uses the files being edited; then the
    share directory of a pip install (``<prefix>/share/sam3_agent_ros``) and of a colcon/ament
    install (every prefix of ``AMENT_PREFIX_PATH``).
    """
    candidates = [Path(__file__).resolve().parents[2] / "config" / name]
    prefixes = [sys.prefix]
    prefixes += [p for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]
    for prefix in prefixes:
        candidates.append(Path(prefix) / "share" / PACKAGE_NAME / "config" / name)
    return candidates


def find_config_file(name: str) -> Path:
    """Path of an existing file of the package's ``config/``; FileNotFoundError if none."""
    candidates = config_file_candidates(name)
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    searched = ", ".join(str(c) for c in candidates)
    raise FileNotFoundError(f"{name} not found; searched: {searched}")


def fastdds_major_from_prefixes(prefixes: Iterable[str | Path]) -> int | None:
    """The major version of the first Fast DDS found in these install prefixes, from its CMake
    package version file (``share/fastdds/cmake/fastdds-config-version.cmake``, or
    ``share/fastrtps/cmake/fastrtps-config-version.cmake`` for 2.x); None if there is none."""
    for prefix in prefixes:
        for package in FASTDDS_PACKAGES:
            version_file = Path(prefix) / "share" / package / "cmake" / \
                f"{package}-config-version.cmake"
            try:
                match = _VERSION_LINE.search(version_file.read_text(errors="replace"))
            except OSError:
                continue
            if match:
                return int(match.group(1))
    return None


def _fastdds_major_from_wheels() -> int | None:
    from importlib import metadata

    for distribution in ("ros-fastdds", "ros-fastrtps"):
        try:
            return int(metadata.version(distribution).split(".")[0])
        except (metadata.PackageNotFoundError, ValueError):
            continue
    return None


def fastdds_major_version(environ: Mapping[str, str] | None = None) -> int | None:
    """The major version (2 or 3) of the Fast DDS this Python's rclpy loads, or None when it
    cannot be told. Looks, without importing rclpy, at this Python's prefix (the PyPI wheels'
    metadata, then the CMake files they lay out as a ROS prefix), then at every prefix of
    ``AMENT_PREFIX_PATH`` (apt ROS, a sourced colcon workspace)."""
    environ = os.environ if environ is None else environ
    major = _fastdds_major_from_wheels() or fastdds_major_from_prefixes([sys.prefix])
    if major is None:
        prefixes = [p for p in environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]
        major = fastdds_major_from_prefixes(prefixes)
    return major


def profiles_file_vars(fastdds_major: int | None) -> tuple[str, ...]:
    """The profile variable(s) to set for that Fast DDS major version (both when unknown)."""
    return PROFILES_FILE_VARS_BY_MAJOR.get(fastdds_major, PROFILES_FILE_VARS)


def random_domain_id() -> int:
    """A random ROS_DOMAIN_ID in RANDOM_DOMAIN_RANGE (inclusive)."""
    low, high = RANDOM_DOMAIN_RANGE
    return random.SystemRandom().randint(low, high)


def _checked_domain_id(domain_id: int | None) -> int:
    if domain_id is None:
        domain_id = random_domain_id()
    if isinstance(domain_id, bool) or not isinstance(domain_id, int):
        raise ValueError(f"ROS domain id must be an int, got {domain_id!r}")
    if not 0 <= domain_id <= MAX_DOMAIN_ID:
        raise ValueError(f"ROS domain id must be in 0..{MAX_DOMAIN_ID}, got {domain_id}")
    return domain_id


def loopback_env(domain_id: int | None = None, fastdds_major: int | None = INSTALLED
                 ) -> dict[str, str]:
    """The environment variables that confine DDS to this host.

    ``domain_id`` None draws one (``random_domain_id``; the tests and demos pass the one they
    reserved, ``sam3_agent_demo.domains``). Raises ValueError for an id Fast DDS cannot use.
    ``fastdds_major``: which profile variable to set (default: the installed Fast DDS's; None:
    both names).
    """
    domain_id = _checked_domain_id(domain_id)
    if fastdds_major == INSTALLED:
        fastdds_major = fastdds_major_version()
    profile = str(find_config_file(LOOPBACK_PROFILE))
    return {
        DISCOVERY_RANGE_VAR: "LOCALHOST",
        DOMAIN_ID_VAR: str(domain_id),
        **{name: profile for name in profiles_file_vars(fastdds_major)},
    }


def profiles_file(env: Mapping[str, str]) -> str:
    """The Fast DDS profile an environment names (under either variable), or ''."""
    return next((env[name] for name in PROFILES_FILE_VARS if env.get(name)), "")


def apply_loopback_env(
    domain_id: int | None = None, environ: MutableMapping[str, str] | None = None,
    fastdds_major: int | None = INSTALLED,
) -> dict[str, str]:
    """Set the loopback environment in ``environ`` (default ``os.environ``) and return it.

    A domain id or profile file the user already exported is kept (they may run several things
    together on purpose); a profile exported under the name the installed Fast DDS does not read
    is also set under the name it reads, so that it takes effect. The discovery range is always
    forced to LOCALHOST.
    """
    target = os.environ if environ is None else environ
    if domain_id is None and target.get(DOMAIN_ID_VAR):
        domain_id = 0  # a stand-in, never applied: the exported id is kept (no reservation)
    wanted = loopback_env(domain_id, fastdds_major)
    user_profile = profiles_file(target)
    if user_profile:
        for name in PROFILES_FILE_VARS:
            if name in wanted:
                wanted[name] = target.get(name) or user_profile
    for key, value in wanted.items():
        if key == DISCOVERY_RANGE_VAR or not target.get(key):
            target[key] = value
    return {key: target[key] for key in wanted}


def exported_domain_id(environ: Mapping[str, str] | None = None) -> int | None:
    """The ``ROS_DOMAIN_ID`` the user exported, None when unset or empty; ValueError when it is
    not a domain id Fast DDS can use."""
    text = (os.environ if environ is None else environ).get(DOMAIN_ID_VAR, "").strip()
    if not text:
        return None
    try:
        return _checked_domain_id(int(text))
    except ValueError:
        raise ValueError(f"{DOMAIN_ID_VAR}={text!r} is not a domain id in "
                         f"0..{MAX_DOMAIN_ID}") from None


def profile_assignment(name: str, fastdds_major: int | None = INSTALLED) -> str:
    """``NAME=PATH`` for the profile ``config/fastdds_<name>.xml`` under the variable the
    installed Fast DDS reads (Fast DDS 3 when it cannot be told: the name Fast DDS 2 ignores is
    the one that cannot silently misconfigure a Kilted install)."""
    if fastdds_major == INSTALLED:
        fastdds_major = fastdds_major_version()
    variable = PROFILES_FILE_VARS_BY_MAJOR.get(fastdds_major, (PROFILES_FILE_VAR,))[0]
    return f"{variable}={find_config_file(f'fastdds_{name}.xml')}"


def main(argv: list[str] | None = None) -> int:
    """``python -m sam3_agent_ros.ros.dds large_images``: print ``NAME=PATH`` of a shipped Fast
    DDS profile for the installed Fast DDS (for ``export`` in a shell without ``ros2 pkg``)."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m sam3_agent_ros.ros.dds PROFILE   (PROFILE: large_images, "
              "loopback)", file=sys.stderr)
        return 2
    try:
        print(profile_assignment(args[0]))
    except FileNotFoundError as exc:
        print(f"no profile {args[0]!r}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

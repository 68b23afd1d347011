"""Environment that keeps DDS traffic on this host (tests, CI, demo, benchmarks).

By default Fast DDS announces every participant by multicast on every network interface. Anything
we start ourselves must instead stay on loopback:

- ``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST`` and an explicit ``ROS_DOMAIN_ID`` (random per run, so
  parallel runs do not see each other);
- ``FASTDDS_DEFAULT_PROFILES_FILE`` (read by Fast DDS 3.x: Kilted) and
  ``FASTRTPS_DEFAULT_PROFILES_FILE`` (Fast DDS 2.x: Jazzy, Humble), both =
  ``config/fastdds_loopback.xml``: shared memory with 64 MiB segments plus UDPv4 limited to
  127.0.0.1, builtin transports off. Setting only one would silently leave the other distros on
  the default transports (multicast on every interface, 512 KB shared-memory segments).

Pure Python: this module does not import rclpy. Apply the environment BEFORE ``rclpy.init()`` (Fast
DDS reads it when the first participant is created) or pass it to a subprocess.
"""

from __future__ import annotations

import os
import random
import sys
from collections.abc import MutableMapping
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


def random_domain_id() -> int:
    """A random ROS_DOMAIN_ID in RANDOM_DOMAIN_RANGE (inclusive)."""
    low, high = RANDOM_DOMAIN_RANGE
    return random.SystemRandom().randint(low, high)


def loopback_env(domain_id: int | None = None) -> dict[str, str]:
    """The environment variables that confine DDS to this host.

    ``domain_id`` None draws a random one. Raises ValueError for an id Fast DDS cannot use.
    """
    if domain_id is None:
        domain_id = random_domain_id()
    if isinstance(domain_id, bool) or not isinstance(domain_id, int):
        raise ValueError(f"ROS domain id must be an int, got {domain_id!r}")
    if not 0 <= domain_id <= MAX_DOMAIN_ID:
        raise ValueError(f"ROS domain id must be in 0..{MAX_DOMAIN_ID}, got {domain_id}")
    profile = str(find_config_file(LOOPBACK_PROFILE))
    return {
        DISCOVERY_RANGE_VAR: "LOCALHOST",
        DOMAIN_ID_VAR: str(domain_id),
        **{name: profile for name in PROFILES_FILE_VARS},
    }


def apply_loopback_env(
    domain_id: int | None = None, environ: MutableMapping[str, str] | None = None
) -> dict[str, str]:
    """Set the loopback environment in ``environ`` (default ``os.environ``) and return it.

    A domain id or profile file the user already exported is kept (they may run several things
    together on purpose); a profile exported under only one of the two Fast DDS variable names
    is copied to the other, so that every Fast DDS version reads the same file. The discovery
    range is always forced to LOCALHOST.
    """
    target = os.environ if environ is None else environ
    wanted = loopback_env(domain_id)
    user_profile = next((target[name] for name in PROFILES_FILE_VARS if target.get(name)), "")
    if user_profile:
        for name in PROFILES_FILE_VARS:
            wanted[name] = target.get(name) or user_profile
    for key, value in wanted.items():
        if key == DISCOVERY_RANGE_VAR or not target.get(key):
            target[key] = value
    return {key: target[key] for key in wanted}

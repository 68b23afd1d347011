"""Domain ids for runs that start nodes (the test suite, the demos, the benchmarks): reserved so
that runs beside each other never share a domain, and the environments built on them.

Runs beside each other (two clones' test suites, CI beside a developer, two demos) must not share
a ``ROS_DOMAIN_ID``: their nodes have the same names and topics and would answer each other. A
random draw alone collides now and then (a suite draws several ids); ``reserve_domain_id`` takes a
lock file per id (``DOMAIN_LOCKS_DIR``) and skips a domain whose discovery port a ROS graph
without these locks already holds. The deployed package's ``sam3_agent_ros.ros.dds`` builds the
loopback environment itself; this module hands it the reserved id. Pure Python (no rclpy).
"""

from __future__ import annotations

import os
import random
import socket
import tempfile
from collections.abc import Iterable, MutableMapping
from pathlib import Path

from sam3_agent_ros.ros.dds import (
    DOMAIN_ID_VAR,
    INSTALLED,
    PROFILES_FILE_VARS,
    RANDOM_DOMAIN_RANGE,
    apply_loopback_env,
    exported_domain_id,
    loopback_env,
)

# Ids reserved by a process of this host (reserve_domain_id): one advisory lock file per id, held
# until the process exits (the kernel releases it even when the process is killed).
DOMAIN_LOCKS_DIR = Path(tempfile.gettempdir()) / "sam3_agent_ros-domains"
_held_domain_locks: dict[int, int] = {}  # domain id -> open lock file descriptor


def discovery_port(domain_id: int, participant_id: int = 0) -> int:
    """The UDP port a participant listens on for discovery (RTPS: 7400 + 250 d + 10 + 2 p)."""
    return 7400 + 250 * domain_id + 10 + 2 * participant_id


def domain_in_use(domain_id: int) -> bool:
    """Whether a DDS participant of this host already runs on ``domain_id``: the first one holds
    its discovery port (participant 0), on loopback or on every interface."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.bind(("127.0.0.1", discovery_port(domain_id)))
        except OSError:
            return True
    return False


def reserve_domain_id(domain_ids: Iterable[int] | None = None,
                      locks_dir: Path | None = None) -> int:
    """A random id of ``domain_ids`` (default: RANDOM_DOMAIN_RANGE) that no other process of this
    host has reserved and no DDS participant uses yet, reserved for this process until it exits.

    Runs beside each other (two clones' test suites, CI beside a developer, two demos) must not
    share a domain: their nodes have the same names and topics and would answer each other. A
    random draw alone collides now and then (a suite draws several ids); a lock file per id
    (``DOMAIN_LOCKS_DIR``) makes the draw exclusive, and the port check skips a domain that a
    ROS graph without these locks already uses. When every id is taken, a random one it is (a
    run must never be refused for it)."""
    import fcntl  # POSIX, like ROS 2 here; imported here so the module imports anywhere

    folder = DOMAIN_LOCKS_DIR if locks_dir is None else locks_dir
    try:
        folder.mkdir(mode=0o777, exist_ok=True)
        os.chmod(folder, 0o1777)  # shared by every user of the host, like /tmp
    except OSError:
        pass
    low, high = RANDOM_DOMAIN_RANGE
    ids = list(range(low, high + 1) if domain_ids is None else domain_ids)
    candidates = [d for d in ids if d not in _held_domain_locks]
    random.SystemRandom().shuffle(candidates)
    for domain_id in candidates:
        try:
            fd = os.open(folder / f"domain-{domain_id}.lock", os.O_RDWR | os.O_CREAT, 0o666)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # reserved by another process
            os.close(fd)
            continue
        if domain_in_use(domain_id):
            os.close(fd)  # releases the lock
            continue
        _held_domain_locks[domain_id] = fd
        return domain_id
    return random.SystemRandom().choice(ids)


def apply_demo_env(environ: MutableMapping[str, str] | None = None,
                   fastdds_major: int | None = INSTALLED) -> str:
    """Put a demo (``make demo``, ``make demo-follow``) on loopback in ``environ`` (default
    ``os.environ``) and return a line saying where it runs: the loopback profile, on the exported
    ``ROS_DOMAIN_ID`` if there is one (so the user's own tools can watch the demo), else on a
    random one (printed, so they can). A profile exported under the name the installed Fast DDS
    does not read is dropped (Fast DDS 3 would only warn about it). ValueError for an exported
    id that is not a domain id."""
    target = os.environ if environ is None else environ
    exported = exported_domain_id(target)
    dds = loopback_env(reserve_domain_id() if exported is None else exported, fastdds_major)
    for name in PROFILES_FILE_VARS:
        target.pop(name, None)
    target.update(dds)
    how = "exported" if exported is not None else \
        "picked at random; export ROS_DOMAIN_ID to choose it"
    return f"DDS on loopback, ROS_DOMAIN_ID={dds[DOMAIN_ID_VAR]} ({how})"


def reserved_loopback_env(fastdds_major: int | None = INSTALLED) -> dict[str, str]:
    """``loopback_env`` on a domain id reserved for this process (a node subprocess of a test)."""
    return loopback_env(reserve_domain_id(), fastdds_major)


def apply_reserved_loopback_env(environ: MutableMapping[str, str] | None = None,
                                fastdds_major: int | None = INSTALLED) -> dict[str, str]:
    """``apply_loopback_env`` with a reserved domain id when ``environ`` exports none."""
    target = os.environ if environ is None else environ
    domain_id = None if target.get(DOMAIN_ID_VAR) else reserve_domain_id()
    return apply_loopback_env(domain_id, target, fastdds_major)

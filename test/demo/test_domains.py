"""demo/sam3_agent_demo/domains.py: the domain ids that runs starting nodes (the suite, the demos,
the benchmarks) reserve, so that runs beside each other never share one, and the demos' DDS
environment (the loopback environment itself is sam3_agent_ros/ros/dds.py: test/ros/test_dds.py).
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from sam3_agent_demo import domains
from sam3_agent_ros.ros import dds

NEW_NAME, OLD_NAME = "FASTDDS_DEFAULT_PROFILES_FILE", "FASTRTPS_DEFAULT_PROFILES_FILE"


def test_drawn_domain_ids_stay_in_the_safe_band_and_are_never_drawn_twice():
    low, high = dds.RANDOM_DOMAIN_RANGE
    assert high <= dds.MAX_DOMAIN_ID
    ids = [int(domains.reserved_loopback_env()["ROS_DOMAIN_ID"]) for _ in range(5)]
    assert all(low <= i <= high for i in ids)
    assert len(set(ids)) == 5, "a drawn id stays reserved by this process"
    assert int(os.environ["ROS_DOMAIN_ID"]) not in ids  # the session's own id is reserved too


HOLDER = """
import sys
from pathlib import Path
from sam3_agent_demo import domains
ids, locks = [int(i) for i in sys.argv[1].split(",")], Path(sys.argv[2])
held = [domains.reserve_domain_id(ids, locks) for _ in range(len(ids) - 1)]
print(" ".join(map(str, held)), flush=True)
sys.stdin.read()  # hold them until killed
"""


def _ids_of_our_own(count: int) -> list[int]:
    """Ids above RANDOM_DOMAIN_RANGE (usable, but no real run draws them), reserved for this
    session in the real locks folder: a second copy of the suite running these tests at the same
    moment works on other ids."""
    return [domains.reserve_domain_id(range(dds.RANDOM_DOMAIN_RANGE[1] + 1, dds.MAX_DOMAIN_ID + 1))
            for _ in range(count)]


def test_another_process_never_gets_a_reserved_domain_id_until_it_exits(tmp_path):
    """Runs beside each other (two clones' suites) reserve disjoint ids, whatever chance draws;
    a killed holder's ids are free again (the kernel drops its locks)."""
    ids = _ids_of_our_own(5)
    # This process holds them in the real folder; the test plays with its own folder.
    for domain_id in ids:
        domains._held_domain_locks.pop(domain_id)
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, ",".join(map(str, ids)),
                               str(tmp_path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    try:
        held = {int(i) for i in holder.stdout.readline().split()}
        assert len(held) == len(ids) - 1
        (free,) = set(ids) - held
        assert domains.reserve_domain_id(ids, tmp_path) == free
    finally:
        holder.kill()
        holder.wait(10)
    assert {domains.reserve_domain_id(ids, tmp_path) for _ in held} == held


def test_a_domain_that_a_participant_already_uses_is_skipped(tmp_path):
    """A ROS graph without our lock files (e.g. a robot on that domain) holds the domain's
    discovery port: that id is not reserved."""
    import socket

    used, free = _ids_of_our_own(2)
    for domain_id in (used, free):
        domains._held_domain_locks.pop(domain_id)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as participant:
        participant.bind(("127.0.0.1", domains.discovery_port(used)))
        assert domains.domain_in_use(used) and not domains.domain_in_use(free)
        assert domains.reserve_domain_id([used, free], tmp_path) == free
    assert not domains.domain_in_use(used)


def test_a_demo_runs_on_the_exported_domain_id():
    environ = {"ROS_DOMAIN_ID": "42", "PATH": "/bin"}
    line = domains.apply_demo_env(environ, fastdds_major=3)
    assert environ["ROS_DOMAIN_ID"] == "42"
    assert line == "DDS on loopback, ROS_DOMAIN_ID=42 (exported)"
    assert environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "LOCALHOST"
    assert environ["PATH"] == "/bin"


def test_a_demo_without_an_exported_domain_id_picks_one_and_says_so():
    environ = {"ROS_DOMAIN_ID": " "}
    line = domains.apply_demo_env(environ, fastdds_major=3)
    low, high = dds.RANDOM_DOMAIN_RANGE
    assert low <= int(environ["ROS_DOMAIN_ID"]) <= high
    assert line == (f"DDS on loopback, ROS_DOMAIN_ID={environ['ROS_DOMAIN_ID']} "
                    "(picked at random; export ROS_DOMAIN_ID to choose it)")


@pytest.mark.parametrize("exported", ["abc", "300", "-1"])
def test_a_demo_refuses_an_exported_domain_id_that_is_not_one(exported):
    with pytest.raises(ValueError, match=f"ROS_DOMAIN_ID='{exported}' is not a domain id"):
        domains.apply_demo_env({"ROS_DOMAIN_ID": exported}, fastdds_major=3)


@pytest.mark.parametrize(("major", "kept", "dropped"), [(3, NEW_NAME, OLD_NAME),
                                                        (2, OLD_NAME, NEW_NAME)])
def test_a_demo_uses_the_loopback_profile_under_the_name_fast_dds_reads_only(
        major, kept, dropped):
    environ = {NEW_NAME: "/robot/large.xml", OLD_NAME: "/robot/large.xml"}
    domains.apply_demo_env(environ, fastdds_major=major)
    assert environ[kept].endswith("fastdds_loopback.xml")
    assert dropped not in environ  # Fast DDS 3 would warn about the old name


def test_the_reserved_session_environment_keeps_an_exported_domain_id():
    environ = {"ROS_DOMAIN_ID": "7"}
    applied = domains.apply_reserved_loopback_env(environ, fastdds_major=3)
    assert applied["ROS_DOMAIN_ID"] == environ["ROS_DOMAIN_ID"] == "7"
    fresh: dict[str, str] = {}
    domain_id = int(domains.apply_reserved_loopback_env(fresh, fastdds_major=3)["ROS_DOMAIN_ID"])
    assert domain_id in domains._held_domain_locks  # reserved for this process


def test_a_cli_verb_without_an_exported_domain_id_draws_one_in_the_band():
    """The deployed ``--loopback`` of the CLI verbs needs no reservation (dds.random_domain_id)."""
    low, high = dds.RANDOM_DOMAIN_RANGE
    assert low <= int(dds.loopback_env(fastdds_major=3)["ROS_DOMAIN_ID"]) <= high

"""sam3_agent_ros/ros/dds.py: the loopback DDS environment and its Fast DDS profile.

The last test sends 640x480 rgb8 frames best-effort between two processes under that environment:
with Fast DDS's default 512 KB shared-memory segments most of them are lost, with the profile's
64 MiB segments all arrive, in the Jazzy venv too, where Fast DDS 2.14 reads only
FASTRTPS_DEFAULT_PROFILES_FILE. That the traffic stays off the network is checked by
scripts/check_dds_loopback.sh, which needs root for tcpdump.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from sam3_agent_ros.ros import dds

PEER_SCRIPT = Path(__file__).with_name("dds_image_peer.py")
FRAME_COUNT = 30
NS = {"dds": "http://www.eprosima.com"}
SHM_SEGMENT_BYTES = 64 * 1024 * 1024


def _transport_descriptors(profile: Path) -> dict[str, ET.Element]:
    root = ET.parse(profile).getroot()
    path = "dds:profiles/dds:transport_descriptors/dds:transport_descriptor"
    descriptors = root.findall(path, NS)
    return {d.findtext("dds:transport_id", namespaces=NS): d for d in descriptors}


def _default_participant(profile: Path) -> ET.Element:
    root = ET.parse(profile).getroot()
    participants = [
        p
        for p in root.findall("dds:profiles/dds:participant", NS)
        if p.get("is_default_profile") == "true"
    ]
    assert len(participants) == 1, "exactly one default participant profile"
    return participants[0]


def test_loopback_env_with_given_domain():
    env = dds.loopback_env(42)
    assert env["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "LOCALHOST"
    assert env["ROS_DOMAIN_ID"] == "42"
    profile = Path(env["FASTDDS_DEFAULT_PROFILES_FILE"])
    assert profile.name == "fastdds_loopback.xml"
    assert profile.is_file()
    # Fast DDS 2.x (Jazzy, Humble) reads the older name only: both name the same file.
    assert env["FASTRTPS_DEFAULT_PROFILES_FILE"] == str(profile)


def test_random_domain_ids_stay_in_the_safe_band():
    low, high = dds.RANDOM_DOMAIN_RANGE
    ids = {int(dds.loopback_env()["ROS_DOMAIN_ID"]) for _ in range(200)}
    assert all(low <= i <= high for i in ids)
    assert high <= dds.MAX_DOMAIN_ID
    assert len(ids) > 10, "domain ids are drawn at random"


@pytest.mark.parametrize("bad_id", [-1, 233, 1000, "5", True, 1.5])
def test_unusable_domain_ids_are_rejected(bad_id):
    with pytest.raises(ValueError, match="domain id"):
        dds.loopback_env(bad_id)


def test_apply_fills_missing_variables():
    environ: dict[str, str] = {}
    applied = dds.apply_loopback_env(17, environ)
    assert environ == applied == dds.loopback_env(17)


def test_apply_keeps_user_choices_but_forces_localhost():
    environ = {
        "ROS_DOMAIN_ID": "7",
        "FASTDDS_DEFAULT_PROFILES_FILE": "/robot/profile.xml",
        "FASTRTPS_DEFAULT_PROFILES_FILE": "/robot/profile_fastdds2.xml",
        "ROS_AUTOMATIC_DISCOVERY_RANGE": "SUBNET",
    }
    applied = dds.apply_loopback_env(17, environ)
    assert applied == {
        "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST",
        "ROS_DOMAIN_ID": "7",
        "FASTDDS_DEFAULT_PROFILES_FILE": "/robot/profile.xml",
        "FASTRTPS_DEFAULT_PROFILES_FILE": "/robot/profile_fastdds2.xml",
    }
    assert environ == applied


@pytest.mark.parametrize("exported", ["FASTDDS_DEFAULT_PROFILES_FILE",
                                      "FASTRTPS_DEFAULT_PROFILES_FILE"])
def test_a_profile_exported_under_one_name_is_used_under_both(exported):
    environ = {exported: "/robot/profile.xml"}
    dds.apply_loopback_env(17, environ)
    assert environ["FASTDDS_DEFAULT_PROFILES_FILE"] == "/robot/profile.xml"
    assert environ["FASTRTPS_DEFAULT_PROFILES_FILE"] == "/robot/profile.xml"


def test_apply_treats_empty_values_as_unset():
    environ = {"ROS_DOMAIN_ID": "", "FASTDDS_DEFAULT_PROFILES_FILE": "",
               "FASTRTPS_DEFAULT_PROFILES_FILE": ""}
    dds.apply_loopback_env(9, environ)
    assert environ["ROS_DOMAIN_ID"] == "9"
    assert environ["FASTDDS_DEFAULT_PROFILES_FILE"].endswith("fastdds_loopback.xml")
    assert environ["FASTRTPS_DEFAULT_PROFILES_FILE"] == environ["FASTDDS_DEFAULT_PROFILES_FILE"]


def test_session_environment_is_applied(ros_env):
    for key, value in ros_env.items():
        assert os.environ[key] == value
    assert ros_env["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "LOCALHOST"


def test_unknown_config_file_names_the_places_searched():
    with pytest.raises(FileNotFoundError, match="no_such_profile.xml not found; searched: "):
        dds.find_config_file("no_such_profile.xml")


def test_config_files_found_in_ament_prefixes(tmp_path, monkeypatch):
    installed = tmp_path / "share" / "sam3_agent_ros" / "config" / "only_installed.xml"
    installed.parent.mkdir(parents=True)
    installed.write_text("<dds/>")
    monkeypatch.setenv("AMENT_PREFIX_PATH", f"/nonexistent{os.pathsep}{tmp_path}")
    assert dds.find_config_file("only_installed.xml") == installed


def test_loopback_profile_confines_transports_to_this_host():
    profile = dds.find_config_file(dds.LOOPBACK_PROFILE)
    participant = _default_participant(profile)
    assert participant.findtext("dds:rtps/dds:useBuiltinTransports", namespaces=NS) == "false"
    used = [t.text for t in participant.findall("dds:rtps/dds:userTransports/dds:transport_id", NS)]
    descriptors = _transport_descriptors(profile)
    assert sorted(used) == sorted(descriptors), "every declared transport is used, no other"
    kinds = {descriptors[t].findtext("dds:type", namespaces=NS): descriptors[t] for t in used}
    assert set(kinds) == {"SHM", "UDPv4"}
    shm, udp = kinds["SHM"], kinds["UDPv4"]
    assert int(shm.findtext("dds:segment_size", namespaces=NS)) == SHM_SEGMENT_BYTES
    assert int(shm.findtext("dds:port_queue_capacity", namespaces=NS)) == 512
    allowed = [a.text for a in udp.findall("dds:interfaceWhiteList/dds:address", NS)]
    assert allowed == ["127.0.0.1"]


def test_large_images_profile_enlarges_shared_memory():
    profile = dds.find_config_file(dds.LARGE_IMAGES_PROFILE)
    participant = _default_participant(profile)
    used = [t.text for t in participant.findall("dds:rtps/dds:userTransports/dds:transport_id", NS)]
    descriptors = _transport_descriptors(profile)
    shm = [d for d in map(descriptors.get, used) if d.findtext("dds:type", namespaces=NS) == "SHM"]
    assert len(shm) == 1
    assert int(shm[0].findtext("dds:segment_size", namespaces=NS)) == SHM_SEGMENT_BYTES


def test_best_effort_640x480_images_all_arrive_between_processes(ros_env):
    env = {**os.environ, **ros_env, "PYTHONUNBUFFERED": "1"}
    command = [sys.executable, str(PEER_SCRIPT)]
    subscriber = subprocess.Popen(
        [*command, "subscribe", str(FRAME_COUNT)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert subscriber.stdout.readline().strip() == "ready"
        publisher = subprocess.run(
            [*command, "publish", str(FRAME_COUNT)],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        out, err = subscriber.communicate(timeout=60)
    finally:
        subscriber.kill()
    assert publisher.returncode == 0, publisher.stderr
    assert subscriber.returncode == 0, err
    for stderr in (publisher.stderr, err):
        assert "XMLPARSER" not in stderr, f"Fast DDS rejected the profile:\n{stderr}"
    report = json.loads(out.strip().splitlines()[-1])
    assert report["bad"] == []
    assert report["received"] == list(range(FRAME_COUNT))

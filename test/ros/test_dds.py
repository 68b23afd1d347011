"""sam3_agent_ros/ros/dds.py: the loopback DDS environment and its Fast DDS profile.

The last test sends 640x480 rgb8 frames best-effort between two processes under that environment:
with Fast DDS's default 512 KB shared-memory segments most of them are lost, with the profile's
64 MiB segments all arrive, in the Jazzy venv too, where Fast DDS 2.14 reads only
FASTRTPS_DEFAULT_PROFILES_FILE, and no process warns that a variable name is deprecated (Fast
DDS 3 does when the old name is set). That the traffic stays off the network is checked by
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


NEW_NAME, OLD_NAME = "FASTDDS_DEFAULT_PROFILES_FILE", "FASTRTPS_DEFAULT_PROFILES_FILE"


@pytest.mark.parametrize(("major", "names"), [(3, [NEW_NAME]), (2, [OLD_NAME]),
                                              (None, [NEW_NAME, OLD_NAME])])
def test_loopback_env_names_the_profile_as_the_fast_dds_version_reads_it(major, names):
    env = dds.loopback_env(42, fastdds_major=major)
    assert env["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "LOCALHOST"
    assert env["ROS_DOMAIN_ID"] == "42"
    assert sorted(k for k in env if k.endswith("_PROFILES_FILE")) == sorted(names)
    profile = Path(env[names[0]])
    assert profile.name == "fastdds_loopback.xml"
    assert profile.is_file()
    assert all(env[name] == str(profile) for name in names)


PROBE_LOADED_FAST_DDS = """
import json, re, rclpy
rclpy.init()
node = rclpy.create_node("probe")
maps = open("/proc/self/maps").read()
print(json.dumps(sorted(set(re.findall(r"lib(fastdds|fastrtps)\\.so\\.(\\d+)", maps)))))
node.destroy_node()
rclpy.shutdown()
"""


def _fastdds_library_major_loaded_by_rclpy() -> int:
    """Independent of dds.py: the Fast DDS shared library a fresh rclpy process maps."""
    out = subprocess.run([sys.executable, "-c", PROBE_LOADED_FAST_DDS], capture_output=True,
                         text=True, timeout=60, check=True).stdout
    libraries = json.loads(out.strip().splitlines()[-1])
    assert libraries in ([["fastdds", "3"]], [["fastrtps", "2"]]), libraries
    return int(libraries[0][1])


def test_the_installed_fast_dds_version_is_the_one_rclpy_loads():
    assert dds.fastdds_major_version() == _fastdds_library_major_loaded_by_rclpy()
    probe = subprocess.run(  # and telling it does not import rclpy
        [sys.executable, "-c", "import sys; from sam3_agent_ros.ros import dds; "
         "print(dds.fastdds_major_version(), 'rclpy' in sys.modules)"],
        capture_output=True, text=True, timeout=60, check=True)
    major, imported = probe.stdout.split()
    assert (int(major), imported) == (dds.fastdds_major_version(), "False")


def _write_version_file(prefix: Path, package: str, version: str) -> None:
    cmake = prefix / "share" / package / "cmake"
    cmake.mkdir(parents=True)
    (cmake / f"{package}-config-version.cmake").write_text(
        f'set(PACKAGE_VERSION "{version}")\n\nif(PACKAGE_VERSION VERSION_LESS 1)\n')


def test_fast_dds_version_from_install_prefixes(tmp_path):
    kilted, jazzy, empty, broken = (tmp_path / n for n in ("kilted", "jazzy", "empty", "broken"))
    _write_version_file(kilted, "fastdds", "3.2.2")
    _write_version_file(jazzy, "fastrtps", "2.14.5")
    (broken / "share" / "fastdds" / "cmake").mkdir(parents=True)
    (broken / "share" / "fastdds" / "cmake" / "fastdds-config-version.cmake").write_text("junk")
    empty.mkdir()
    assert dds.fastdds_major_from_prefixes([kilted]) == 3
    assert dds.fastdds_major_from_prefixes([jazzy]) == 2
    assert dds.fastdds_major_from_prefixes([empty, broken, "/nonexistent", jazzy]) == 2
    assert dds.fastdds_major_from_prefixes([empty, broken]) is None


@pytest.mark.parametrize("bad_id", [-1, 233, 1000, "5", True, 1.5])
def test_unusable_domain_ids_are_rejected(bad_id):
    with pytest.raises(ValueError, match="domain id"):
        dds.loopback_env(bad_id)


def test_apply_fills_missing_variables():
    environ: dict[str, str] = {}
    applied = dds.apply_loopback_env(17, environ, fastdds_major=3)
    assert environ == applied == dds.loopback_env(17, fastdds_major=3)


def test_apply_keeps_user_choices_but_forces_localhost():
    environ = {
        "ROS_DOMAIN_ID": "7",
        NEW_NAME: "/robot/profile.xml",
        OLD_NAME: "/robot/profile_fastdds2.xml",
        "ROS_AUTOMATIC_DISCOVERY_RANGE": "SUBNET",
    }
    applied = dds.apply_loopback_env(17, environ, fastdds_major=None)
    assert applied == {
        "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST",
        "ROS_DOMAIN_ID": "7",
        NEW_NAME: "/robot/profile.xml",
        OLD_NAME: "/robot/profile_fastdds2.xml",
    }
    assert environ == applied


@pytest.mark.parametrize("exported", [NEW_NAME, OLD_NAME])
@pytest.mark.parametrize(("major", "read_by_it"), [(3, NEW_NAME), (2, OLD_NAME)])
def test_a_profile_exported_under_either_name_reaches_the_name_fast_dds_reads(
        exported, major, read_by_it):
    environ = {exported: "/robot/profile.xml"}
    dds.apply_loopback_env(17, environ, fastdds_major=major)
    assert environ[read_by_it] == "/robot/profile.xml"
    assert {k for k in environ if k.endswith("_PROFILES_FILE")} == {exported, read_by_it}


def test_apply_treats_empty_values_as_unset():
    environ = {"ROS_DOMAIN_ID": "", NEW_NAME: "", OLD_NAME: ""}
    dds.apply_loopback_env(9, environ, fastdds_major=None)
    assert environ["ROS_DOMAIN_ID"] == "9"
    assert environ[NEW_NAME].endswith("fastdds_loopback.xml")
    assert environ[OLD_NAME] == environ[NEW_NAME]


@pytest.mark.parametrize(("major", "name"), [(3, NEW_NAME), (2, OLD_NAME), (None, NEW_NAME)])
def test_profile_assignment_for_a_shell(major, name):
    assignment = dds.profile_assignment("large_images", fastdds_major=major)
    variable, path = assignment.split("=", 1)
    assert variable == name
    assert Path(path) == dds.find_config_file(dds.LARGE_IMAGES_PROFILE)


def test_profile_assignment_on_the_command_line(capsys):
    assert dds.main(["large_images"]) == 0
    assert capsys.readouterr().out == dds.profile_assignment("large_images") + "\n"
    assert dds.main(["no_such"]) == 1
    assert "fastdds_no_such.xml not found" in capsys.readouterr().err
    assert dds.main([]) == 2


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
        assert "deprecated" not in stderr, stderr
    report = json.loads(out.strip().splitlines()[-1])
    assert report["bad"] == []
    assert report["received"] == list(range(FRAME_COUNT))

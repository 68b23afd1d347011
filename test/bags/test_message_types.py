"""Issue 17 item 9: a bag's type name imported any installed top-level module (``this/msg/Foo``
ran ``this``). Type names now resolve only to ROS interface packages of the ament index."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from sam3_agent_ros.bags.message_types import (
    INTERFACES_INDEX,
    UnknownMessageType,
    check_message_type,
    index_prefixes,
    message_class,
)
from sam3_agent_ros.bags.replay import replay_bag

EVIL = "evil_side_effects"  # a top-level module whose import writes a marker file


@pytest.fixture
def evil_module(tmp_path, monkeypatch):
    """An importable package ``evil_side_effects`` (with a ``msg`` module holding ``Foo``) whose
    import leaves ``marker``; returns the marker path."""
    marker = tmp_path / "imported.txt"
    package = tmp_path / "modules" / EVIL
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(
        f"from pathlib import Path\nPath({str(marker)!r}).write_text('ran')\n")
    (package / "msg.py").write_text("class Foo:\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path / "modules"))
    monkeypatch.delitem(sys.modules, EVIL, raising=False)
    monkeypatch.delitem(sys.modules, f"{EVIL}.msg", raising=False)
    yield marker
    sys.modules.pop(f"{EVIL}.msg", None)
    sys.modules.pop(EVIL, None)


def test_a_module_outside_the_index_is_never_imported(evil_module):
    with pytest.raises(UnknownMessageType, match="not an installed ROS interface package"):
        message_class(f"{EVIL}/msg/Foo")
    assert not evil_module.exists() and EVIL not in sys.modules


def test_registering_it_in_an_ament_prefix_is_what_allows_it(evil_module, tmp_path,
                                                             monkeypatch):
    """The check can fail: the same module, once in the index, is imported."""
    prefix = tmp_path / "prefix"
    (prefix / INTERFACES_INDEX).mkdir(parents=True)
    (prefix / INTERFACES_INDEX / EVIL).write_text("msg/Foo.idl\nmsg/Foo.msg\n")
    monkeypatch.setenv("AMENT_PREFIX_PATH", str(prefix))
    assert index_prefixes()[0] == prefix and index_prefixes()[-1] == Path(sys.prefix)
    with pytest.raises(UnknownMessageType, match="has no message Bar"):
        message_class(f"{EVIL}/msg/Bar")
    assert not evil_module.exists()
    assert message_class(f"{EVIL}/msg/Foo").__name__ == "Foo"
    assert evil_module.read_text() == "ran"


def test_installed_interfaces_resolve_from_this_pythons_prefix(monkeypatch):
    monkeypatch.delenv("AMENT_PREFIX_PATH", raising=False)
    assert check_message_type("std_msgs/msg/String") == ("std_msgs", "String")
    assert message_class("sensor_msgs/msg/CompressedImage").__name__ == "CompressedImage"
    with pytest.raises(UnknownMessageType, match="has no message NoSuchThing"):
        check_message_type("std_msgs/msg/NoSuchThing")


@pytest.mark.parametrize("name", ["this/msg/Foo", "os/msg/Path", "antigravity/msg/X",
                                  "this/Foo", "os.path/msg/X", "../../etc/msg/Passwd",
                                  "std_msgs/srv/String", "std_msgs/msg/string", "",
                                  "std_msgs/msg/String/msg/X", "Std_msgs/msg/String"])
def test_names_that_are_no_message_of_an_interface_package_are_refused(name):
    before = set(sys.modules)
    with pytest.raises(UnknownMessageType):
        message_class(name)
    assert set(sys.modules) == before  # nothing was imported


def test_a_bag_naming_such_a_type_plays_its_other_topics_and_imports_nothing(
        ros_node, tmp_path, evil_module):
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore

    store = get_typestore(Stores.ROS2_KILTED)
    store.register(get_types_from_msg("string data", f"{EVIL}/msg/Foo"))
    path = tmp_path / "evil_bag"
    with Writer(path, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        evil = writer.add_connection("/evil", f"{EVIL}/msg/Foo", typestore=store)
        chatter = writer.add_connection("/chatter", "std_msgs/msg/String", typestore=store)
        for index in range(3):
            message = store.types["std_msgs/msg/String"](data=f"msg {index}")
            data = store.serialize_cdr(message, "std_msgs/msg/String")
            writer.write(evil, 10**9 + index, data)  # same layout: one string
            writer.write(chatter, 10**9 + index, data)
    stats = replay_bag(path, ros_node, rate=100.0)
    assert stats.published == {"/chatter": 3}
    assert "not an installed ROS interface package" in stats.skipped_topics["/evil"]
    assert not evil_module.exists() and EVIL not in sys.modules

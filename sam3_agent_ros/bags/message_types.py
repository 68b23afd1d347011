"""Message classes for type names that come from outside: a bag's connections, a peer's topics.

A type name ``pkg/msg/Name`` becomes an import of ``pkg.msg``, which runs ``pkg/__init__.py``
first: any installed top-level module, chosen by whoever wrote the bag or advertised the topic
(``this/msg/Foo`` ran ``this``). So the name is checked before anything is imported: ``pkg`` must
be a ROS interface package registered in the ament resource index
(``share/ament_index/resource_index/rosidl_interfaces/<pkg>``, in a prefix of
``AMENT_PREFIX_PATH`` or in this Python's own prefix: the PyPI wheels lay a venv out as a ROS
prefix, and ``scripts/build_interfaces.sh`` installs ours there), and its index entry must list
``msg/<Name>.msg`` or ``msg/<Name>.idl``. Reading the index is reading text files; it imports
nothing.

A bag's connection needs the message definition too (mcap stores it; rosbags serialises with it):
``register_message_type`` adds a type the rosbags store does not know (the package's own
``sam3_agent_ros/msg/ConceptDetections``, any other interface package's), and the types it uses,
from the ``.msg`` files the same index prefix installs under ``share/<pkg>/msg/``.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
from pathlib import Path

INTERFACES_INDEX = Path("share", "ament_index", "resource_index", "rosidl_interfaces")
_PACKAGE = re.compile(r"[a-z][a-z0-9_]*\Z")  # ROS package names (REP 144)
_MESSAGE = re.compile(r"[A-Z][A-Za-z0-9]*\Z")  # rosidl message names


class UnknownMessageType(ImportError):
    """The type name is not a message of an installed ROS interface package; ``str`` says why."""


def index_prefixes() -> list[Path]:
    """Where the ament index is searched: ``AMENT_PREFIX_PATH``, then this Python's prefix."""
    found = [Path(p) for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]
    found.append(Path(sys.prefix))
    return list(dict.fromkeys(found))


def interface_files(package: str) -> set[str] | None:
    """The interface files (``msg/String.msg``, ...) the index lists for ``package``, or None
    when no prefix registers it as an interface package. ``package`` must be a valid name."""
    for prefix in index_prefixes():
        entry = prefix / INTERFACES_INDEX / package
        try:
            return {line.strip() for line in entry.read_text(encoding="utf-8").splitlines()}
        except (OSError, UnicodeDecodeError):
            continue
    return None


def check_message_type(msgtype: str) -> tuple[str, str]:
    """``(package, name)`` of ``pkg/msg/Name`` when it names a message of an interface package
    in the ament index; ``UnknownMessageType`` otherwise. Imports nothing."""
    package, sep, name = msgtype.partition("/msg/")
    if not sep or not _PACKAGE.match(package) or not _MESSAGE.match(name):
        raise UnknownMessageType(f"{msgtype!r} is not a ROS message type name (pkg/msg/Name)")
    files = interface_files(package)
    if files is None:
        raise UnknownMessageType(
            f"{package!r} is not an installed ROS interface package (not in the ament index "
            f"of {os.pathsep.join(str(p) for p in index_prefixes())})")
    if f"msg/{name}.msg" not in files and f"msg/{name}.idl" not in files:
        raise UnknownMessageType(f"the interface package {package} has no message {name}")
    return package, name


def message_class(msgtype: str):
    """The generated Python class of ``pkg/msg/Name``; ``UnknownMessageType`` (an ImportError)
    when the name is not a message of an installed interface package, ImportError when the
    package is registered but its Python module cannot be imported."""
    package, name = check_message_type(msgtype)
    module = importlib.import_module(f"{package}.msg")
    cls = getattr(module, name, None)
    if cls is None:
        raise UnknownMessageType(f"{package}.msg has no class {name}")
    return cls


MAX_DESCRIBED_TYPES = 64  # a message and what it uses; more is not a real interface


def message_definition(msgtype: str) -> str:
    """The text of ``share/<pkg>/msg/<Name>.msg`` of a checked message type; UnknownMessageType
    when no prefix has it (a message defined only in ``.idl`` cannot be described in a bag)."""
    package, name = check_message_type(msgtype)
    for prefix in index_prefixes():
        path = prefix / "share" / package / "msg" / f"{name}.msg"
        try:
            return path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
    raise UnknownMessageType(f"no readable share/{package}/msg/{name}.msg in "
                             f"{os.pathsep.join(str(p) for p in index_prefixes())}")


def register_message_type(typestore, msgtype: str) -> None:
    """Make the rosbags ``typestore`` know ``msgtype`` and every message type it uses, reading
    the ones it does not know from their ``.msg`` files (``message_definition``).
    UnknownMessageType (or rosbags' parse error) says which one could not be described."""
    from rosbags.typesys import get_types_from_msg

    pending, described = [msgtype], 0
    while pending:
        current = pending.pop()
        if current in typestore.fielddefs:
            continue
        described += 1
        if described > MAX_DESCRIBED_TYPES:
            raise UnknownMessageType(f"{msgtype} uses more than {MAX_DESCRIBED_TYPES} types")
        types = get_types_from_msg(message_definition(current), current)
        typestore.register(types)
        for _constants, fields in types.values():
            for _name, field in fields:
                pending.extend(_named_types(field))


def _named_types(field) -> list[str]:
    """The message type names in one rosbags field description (arrays and sequences too)."""
    from rosbags.interfaces import Nodetype

    kind, argument = field
    if kind == Nodetype.NAME:
        return [argument]
    if kind in (Nodetype.ARRAY, Nodetype.SEQUENCE):
        return _named_types(argument[0])
    return []

"""Every output publisher of the node, created in one place from one table
(``output_topics.OUTPUT_TOPICS``: topic -> message type) and filled lazily.

Whoever sends outputs (the answer and follow publishers of ``ros/outputs.py``, the standing
concepts, the depth step for the 3D topics' lifetime) holds ``Publishers`` for the topics it
needs: a topic two holders share (``~/markers``: answers and follow updates) has ONE publisher,
destroyed when its last holder is. ``wanted(name)`` says whether a message for ``name`` is worth
building: its publisher exists and somebody subscribes, or it is one of
``output_topics.ALWAYS_SENT`` (``~/result``, ``~/status``, ``~/follow/status``). ``publish``
never raises: a failure is a warning, once per topic (the names are the table's, a fixed set).
"""

from __future__ import annotations

import importlib
import threading
import weakref
from collections.abc import Iterable, Mapping
from typing import Any

from rclpy.qos import QoSProfile

from sam3_agent_ros.ros.output_topics import ALWAYS_SENT, TYPE_OF
from sam3_agent_ros.ros.qos import OUTPUT_QOS


def message_type(name: str) -> Any:
    """The message class of output topic ``name`` (``pkg/msg/Type`` in the table)."""
    package, _, type_name = TYPE_OF[name].split("/")
    return getattr(importlib.import_module(f"{package}.msg"), type_name)


class _Shared:
    """One node's publishers with their holder counts."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.publishers: dict[str, Any] = {}
        self.holders: dict[str, int] = {}
        self.warned: set[str] = set()  # topic names of the table: bounded


_SHARED: weakref.WeakKeyDictionary[Any, _Shared] = weakref.WeakKeyDictionary()
_SHARED_LOCK = threading.Lock()


def _shared(node: Any) -> _Shared:
    with _SHARED_LOCK:
        shared = _SHARED.get(node)
        if shared is None:
            shared = _SHARED[node] = _Shared()
        return shared


class Publishers:
    """The publishers of ``names`` (output topics of the table) on ``node``, held while this
    lives; ``wanted`` / ``publish`` reach any output topic the node has now. ``qos`` for each,
    but those of ``qos_of`` (the QoS of a topic is its first holder's)."""

    def __init__(self, node: Any, names: Iterable[str], qos: QoSProfile = OUTPUT_QOS,
                 qos_of: Mapping[str, QoSProfile] | None = None):
        self._node = node
        self._shared = _shared(node)
        self._names: list[str] = []
        shared = self._shared
        with shared.lock:
            for name in names:
                if name in self._names:
                    continue
                if name not in shared.publishers:
                    shared.publishers[name] = node.create_publisher(
                        message_type(name), name, (qos_of or {}).get(name, qos))
                shared.holders[name] = shared.holders.get(name, 0) + 1
                self._names.append(name)

    def __contains__(self, name: object) -> bool:
        return name in self._names

    def __getitem__(self, name: str) -> Any:
        """The publisher of ``name`` (KeyError when nobody holds it)."""
        return self._shared.publishers[name]

    def exists(self, name: str) -> bool:
        """Whether the node has a publisher of ``name`` now (held here or by another holder:
        the 3D topics live while depth is on)."""
        return name in self._shared.publishers

    @property
    def names(self) -> list[str]:
        return list(self._names)

    def subscribed(self, name: str) -> bool:
        """Whether ``name`` is held and has at least one subscriber (False when it cannot
        say, e.g. a destroyed publisher)."""
        publisher = self._shared.publishers.get(name)
        if publisher is None:
            return False
        try:
            return bool(publisher.get_subscription_count() > 0)
        except Exception:  # noqa: BLE001 (destroyed meanwhile: nobody to build for)
            return False

    def wanted(self, name: str) -> bool:
        """Whether a message for ``name`` is worth building (see the module's docstring)."""
        return self.exists(name) and (name in ALWAYS_SENT or self.subscribed(name))

    def publish(self, name: str, message: Any) -> None:
        """Send ``message`` on ``name`` (nothing when None or not held). Never raises."""
        publisher = self._shared.publishers.get(name)
        if message is None or publisher is None:
            return
        try:
            publisher.publish(message)
        except Exception as exc:  # noqa: BLE001
            shared = self._shared
            with shared.lock:
                first = name not in shared.warned
                shared.warned.add(name)
            if first:
                self._node.get_logger().warning(
                    f"cannot publish {name}: {type(exc).__name__}: {exc} (said once)")

    def destroy(self) -> None:
        """Let go of the held topics; a publisher goes when its last holder lets go."""
        shared, names, self._names = self._shared, self._names, []
        with shared.lock:
            for name in names:
                shared.holders[name] -= 1
                if shared.holders[name] > 0:
                    continue
                del shared.holders[name]
                publisher = shared.publishers.pop(name)
                try:
                    self._node.destroy_publisher(publisher)
                except Exception as exc:  # noqa: BLE001 (teardown goes on)
                    self._node.get_logger().warning(f"destroying {name} failed: {exc}")


def context_ok(node: Any) -> bool:
    """False once rclpy is shut down (nothing can be published)."""
    context = getattr(node, "context", None)
    return context is None or bool(context.ok())

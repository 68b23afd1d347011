"""Test-side ROS harness: the node under test in a subprocess, a test node in this process.

``NodeProcess`` starts ``sam3_agent_node`` the way a user does (``--ros-args --params-file ...
-r __ns:=...``), through the demos' node-process harness (``sam3_agent_demo.node_process``).
``Harness`` is an rclpy node spinning in a background thread (``Spinner``) that
publishes frames (``Camera``) and queries and records everything the node publishes. The caller
must have put DDS on loopback (``sam3_agent_ros.ros.dds``) before creating either.

Two DDS facts the harness is built around (each cost a suite run beside other DDS work):
- A sample published before the writer has matched a reader never reaches that reader (volatile
  durability), and discovery is asynchronous, slower on a loaded machine: the node may publish
  the answer to a test's first query before its writers know the test's subscriptions, although
  the test saw the node's query subscription. ``Harness.send_query`` therefore first makes sure
  the node's writers reach this harness (``wait_outputs_reach_us``, a probe round trip).
- rclpy's executors can raise out of a wait when another thread creates or destroys an entity
  at that moment (``InvalidHandle`` for a destroyed subscription, publisher or action client;
  ``AttributeError: ... '_lock'`` for an action client listed before its constructor finished);
  ``executor.spin()`` then ends and no callback runs again. ``Spinner`` keeps spinning through it,
  and ``Harness.created`` builds an entity while no wait set is being built (action clients:
  ``Harness.action_client``; the benches and tests make theirs there).
"""

from __future__ import annotations

import itertools
import json
import signal
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import rclpy
import yaml
from lifecycle_msgs.msg import Transition
from lifecycle_msgs.srv import ChangeState, GetState
from rcl_interfaces.msg import Parameter as ParameterMsg
from rcl_interfaces.msg import ParameterValue
from rcl_interfaces.srv import (
    DescribeParameters,
    GetParameters,
    SetParameters,
    SetParametersAtomically,
)
from rclpy.action import ActionClient
from rclpy.exceptions import InvalidHandle
from rclpy.executors import SingleThreadedExecutor
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import CompressedImage, Image
from std_msgs.msg import String

from sam3_agent_demo import node_process
from sam3_agent_demo.node_process import node_command  # noqa: F401 (the tests' import)
from sam3_agent_ros.config import OFFLINE_BACKENDS, nest

REPO_ROOT = Path(__file__).resolve().parents[2]
RELIABLE = QoSProfile(reliability=ReliabilityPolicy.RELIABLE, history=HistoryPolicy.KEEP_LAST,
                      depth=50, durability=DurabilityPolicy.VOLATILE)
OFFLINE = nest(OFFLINE_BACKENDS)  # {"llm": {"backend": "offline"}, "segmenter": {...}}


def deep_merge(base: dict, extra: dict) -> dict:
    out = dict(base)
    for key, value in extra.items():
        out[key] = deep_merge(out[key], value) if isinstance(value, dict) and isinstance(
            out.get(key), dict) else value
    return out


class Spinner:
    """Spins ``executor`` in a daemon thread until ``stop()`` (or its context shuts down).

    rclpy builds each wait set from the entities of its nodes while other threads may create or
    destroy them. A subscription, publisher or action client destroyed between that listing and
    the wait is skipped once, then added anyway: ``InvalidHandle`` out of ``spin_once`` (rclpy 9).
    An ``ActionClient`` joins its node's waitables before its constructor sets the lock that
    ``get_num_entities`` takes: a wait set built in between raises ``AttributeError``. Either way
    ``executor.spin()`` ends, silently in a background thread, and no callback of that executor
    runs again: every later wait of the module times out (a module lost ``camera_info`` for four
    tests in a row that way; another every action goal after a client was made). A wait whose
    wait-set building raised is simply waited again here (at most ``MAX_WAIT_SET_RACES`` times in
    a row); any other exception (a callback raised) ends the spinner and is kept in ``error``, so
    that the waits fail at once saying so (``check``). ``paused`` builds an entity between two
    turns, so that the race does not happen at all (``Harness.created``).
    """

    MAX_WAIT_SET_RACES = 100  # in a row: then it is no race, and the spinner stops with it

    def __init__(self, executor: Any, name: str = "spinner"):
        self.executor = executor
        self.error: BaseException | None = None
        # paused(): builders waiting for the spinner to stand still, and whether it is in a turn
        self._turns = threading.Condition()
        self._builders = 0
        self._in_turn = False
        self.wait_set_races = 0  # waits redone after an entity was created/destroyed meanwhile
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        context = self.executor.context
        in_a_row = 0
        while not self._stop.is_set() and context.ok():
            with self._turns:
                while self._builders:  # a builder goes first (paused)
                    self._turns.wait(0.1)
                self._in_turn = True
            try:
                self.executor.spin_once(timeout_sec=0.1)
                in_a_row = 0
            except Exception as exc:
                if raised_building_the_wait_set(exc) and in_a_row < self.MAX_WAIT_SET_RACES:
                    self.wait_set_races += 1
                    in_a_row += 1
                    continue
                if not self._stop.is_set() and context.ok():  # the waits say why (check)
                    self.error = exc
                return
            finally:
                with self._turns:
                    self._in_turn = False
                    self._turns.notify_all()

    def paused(self, build: Callable[[], Any]) -> Any:
        """``build()`` while the spinner waits between two turns (no wait set is being built
        meanwhile): the executor is woken so that its current wait ends at once. From a callback
        (the spinner's own thread, between the waits anyway): at once."""
        if threading.current_thread() is self._thread:
            return build()
        with self._turns:
            self._builders += 1
            try:
                self.executor.wake()
                while self._in_turn:
                    self._turns.wait(0.1)
                return build()
            finally:
                self._builders -= 1
                self._turns.notify_all()

    def check(self) -> None:
        """Raise ``SpinnerDied`` if the spinner stopped on an exception."""
        if self.error is not None:
            raise SpinnerDied(f"the test executor stopped spinning: "
                              f"{type(self.error).__name__}: {self.error}") from self.error

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self._thread.join(timeout)


def raised_building_the_wait_set(exc: BaseException) -> bool:
    """Whether ``exc`` came out of rclpy's wait-set building (an entity created or destroyed by
    another thread meanwhile), not out of a callback: ``InvalidHandle``, or any exception raised
    inside the executor's ``_wait_for_ready_callbacks`` (callbacks run after it returned)."""
    if isinstance(exc, InvalidHandle):
        return True
    frame = exc.__traceback__
    while frame is not None:
        if frame.tb_frame.f_code.co_name == "_wait_for_ready_callbacks":
            return True
        frame = frame.tb_next
    return False


class SpinnerDied(AssertionError):
    """The executor of a test node stopped (a callback raised): nothing more will arrive."""


class NodeDied(AssertionError):
    """A node process under test exited before the test stopped it."""


# Node processes started and not yet stopped: every wait of a Harness checks they still run, so a
# node that dies at start-up (import error, wrong rclpy API, bad argument) fails the test at once
# with its log instead of after every timeout of the test.
_RUNNING: weakref.WeakSet[NodeProcess] = weakref.WeakSet()
LOG_TAIL_LINES = 40
STOP_TIMEOUT_S = 15.0  # a node's Ctrl-C shutdown, before SIGABRT
RESEND_AFTER_S = 3.0  # a service request without a reply by then is sent again (see _call)


def check_nodes_alive() -> None:
    """Raise NodeDied for the first started, not yet stopped node process that has exited."""
    for proc in list(_RUNNING):
        proc.check_alive()


class NodeProcess(node_process.NodeProcess):
    """``sam3_agent_node`` in a subprocess (the demos' ``sam3_agent_demo.node_process``), with
    its parameters in a YAML file: ``parameters`` over the offline backends (``OFFLINE``), or over
    the node's own defaults (the real backends) with ``offline=False``. Every wait of a
    ``Harness`` checks it still runs until the test stops it."""

    def __init__(self, namespace: str, parameters: dict, tmp_dir: Path,
                 env: dict[str, str] | None = None, ros_args: tuple[str, ...] = (),
                 offline: bool = True):
        self.namespace = namespace
        self.name = f"{namespace}/sam3_agent"
        tmp_dir.mkdir(parents=True, exist_ok=True)
        slug = namespace.strip("/").replace("/", "_") or "root"
        self.params_file = tmp_dir / f"{slug}.yaml"
        self.params_file.write_text(
            yaml.safe_dump({"/**/sam3_agent": {
                "ros__parameters": deep_merge(OFFLINE if offline else {}, parameters)}}))
        proc_env = node_process.node_env(env)
        # A node that does not exit after Ctrl-C gets SIGABRT (stop): Python then writes every
        # thread's stack into the log, which says where it hangs.
        proc_env.setdefault("PYTHONFAULTHANDLER", "1")
        command = node_process.node_command() + [
            "--ros-args", "--params-file", str(self.params_file), "-r", f"__ns:={namespace}",
            *ros_args]
        super().__init__(command, tmp_dir / f"{slug}.log", proc_env, cwd=tmp_dir,
                         stop_timeout_s=STOP_TIMEOUT_S, hung_signal=signal.SIGABRT)
        _RUNNING.add(self)

    @property
    def log_file(self) -> Path:
        return self.log_path

    def check_alive(self) -> None:
        """Raise NodeDied (with the tail of its stdout/stderr) if the process has exited."""
        status = self.process.poll()
        if status is None:
            return
        _RUNNING.discard(self)
        raise NodeDied(f"node process {self.name} exited with status {status} before the test "
                       f"stopped it; last lines of {self.log_file}:\n"
                       f"{self.log_tail(LOG_TAIL_LINES)}")

    def send_signal(self, sig: int) -> None:
        """A signal the test means the node to exit by (SIGINT, SIGTERM, SIGKILL): from now on
        its exit is no death that fails the harness's waits."""
        _RUNNING.discard(self)
        self.process.send_signal(sig)

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> int:
        """Ctrl-C, like a user; returns the exit status. A node still running ``timeout`` s
        later gets SIGABRT (its threads' stacks go to the log: status -6), then SIGKILL."""
        _RUNNING.discard(self)
        return super().stop(timeout)


@dataclass
class Received:
    msg: Any
    at: float


@dataclass
class _Topic:
    items: list[Received] = field(default_factory=list)


class Harness:
    """An rclpy node in a background thread (``Spinner``), with its own context."""

    def __init__(self, name: str = "sam3_agent_test"):
        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node(name, context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self._changed = threading.Condition()
        self._topics: dict[str, _Topic] = {}
        self._publishers: dict[str, Any] = {}
        self._probes = itertools.count(1)
        self._probe_readers: list[Any] = []  # kept: destroying them would only wake the spinner
        self._reached: dict[str, tuple] = {}  # namespace -> what the last probe round trip proved
        self._spinner = Spinner(self.executor, f"harness {name}")

    def close(self) -> None:
        self._spinner.stop()
        self.executor.shutdown(timeout_sec=2.0)
        self.node.destroy_node()
        rclpy.shutdown(context=self.context)

    def created(self, build: Callable[[], Any]) -> Any:
        """What ``build()`` returns (an entity of ``self.node``), built between two turns of the
        spinner: an ``ActionClient`` (or a ``SegmentClient``, which holds one) made while a wait
        set is being built stops the executor (see the module's docstring)."""
        return self._spinner.paused(build)

    def action_client(self, action_type: Any, name: str, **qos: Any) -> ActionClient:
        """An ``ActionClient`` of ``self.node``, made safely while the harness spins."""
        return self.created(lambda: ActionClient(self.node, action_type, name, **qos))

    # --- subscriptions ---------------------------------------------------------------------------
    def listen(self, topic: str, msg_type: Any = String, qos: QoSProfile = RELIABLE) -> None:
        if topic in self._topics:
            return
        record = self._topics[topic] = _Topic()

        def on_msg(msg: Any) -> None:
            with self._changed:
                record.items.append(Received(msg, time.monotonic()))
                self._changed.notify_all()

        self.node.create_subscription(msg_type, topic, on_msg, qos)

    def messages(self, topic: str) -> list[Any]:
        with self._changed:
            return [r.msg for r in self._topics[topic].items]

    def wait_for(self, predicate: Callable[[], Any], timeout: float, what: str = "") -> Any:
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                value = predicate()
                if value:
                    return value
                check_nodes_alive()
                self._spinner.check()
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"timed out after {timeout} s waiting for {what}"
                                       + (f" ({self.topics_summary()})" if what else ""))
                self._changed.wait(min(left, 0.1))

    def json_messages(self, topic: str) -> list[dict]:
        return [json.loads(m.data) for m in self.messages(topic)]

    def results(self, namespace: str, query_id: str | None = None) -> list[dict]:
        """The results on ``{namespace}/sam3_agent/result`` (of ``query_id``), probes left out."""
        out = self.json_messages(f"{namespace}/sam3_agent/result")
        return [r for r in out if (r["query_id"] == query_id if query_id is not None
                                   else not is_probe(r["query_id"]))]

    def wait_result(self, namespace: str, query_id: str, timeout: float = 20.0) -> dict:
        found = self.wait_for(lambda: self.results(namespace, query_id), timeout,
                              f"the result of {query_id} on {namespace}")
        return found[0]

    def statuses(self, namespace: str, query_id: str) -> list[dict]:
        out = self.json_messages(f"{namespace}/sam3_agent/status")
        return [s for s in out if s["query_id"] == query_id]

    # --- the node's writers reach this harness -----------------------------------------------
    def wait_outputs_reach_us(self, namespace: str, timeout: float = 60.0) -> None:
        """Return once whatever the node of ``namespace`` publishes reaches the readers this
        harness has (its subscriptions, and the response readers of its action clients).

        Seeing the node's query subscription says nothing about the other direction: the node's
        writers match this harness's readers when the node has processed their discovery
        announcements, and a sample written before that is lost for them (volatile durability;
        lazy image topics are not even rendered). Proof by round trip: the node's answer to a
        probe query (an empty query: a ``failed`` result and a ``done`` status, nothing run) must
        reach this harness's readers of ``~/result`` and ``~/status``, and a fresh reader of
        ``~/result`` created after every other reader (Fast DDS announces a participant's readers
        in creation order and the node matches each one on arrival: once the newest is matched,
        the image readers and action clients created before it are too). Probes are sent again
        every second (the first may go out before the node is active) and left out of
        ``results()``. Done again only when this harness has new readers or the node was
        restarted."""
        if self._reached.get(namespace) == self._readers_key(namespace):
            return
        probe_ids: set[str] = set()
        sentinel = f"{namespace}/sam3_agent/result (probe reader {len(self._probe_readers)})"
        record = self._topics[sentinel] = _Topic()

        def on_result(msg: String) -> None:
            with self._changed:
                record.items.append(Received(msg, time.monotonic()))
                self._changed.notify_all()

        self._probe_readers.append(self.node.create_subscription(
            String, f"{namespace}/sam3_agent/result", on_result, RELIABLE))
        readers = [sentinel] + [f"{namespace}/sam3_agent/{name}" for name in ("result", "status")
                                if f"{namespace}/sam3_agent/{name}" in self._topics]

        def answered() -> bool:
            return all(any(json.loads(m.data).get("query_id") in probe_ids
                           for m in self.messages(topic)) for topic in readers)

        deadline = time.monotonic() + timeout
        while True:
            probe_id = f"{PROBE_PREFIX}{next(self._probes)}"
            probe_ids.add(probe_id)
            self.send_query(namespace, {"id": probe_id, "query": ""}, probe=False)
            try:
                self.wait_for(answered, min(1.0, max(0.0, deadline - time.monotonic())))
                break
            except TimeoutError:
                if time.monotonic() >= deadline:
                    raise TimeoutError(
                        f"the node of {namespace} did not answer a probe query within {timeout} s"
                        f" on every reader ({self.topics_summary()}): is it active?") from None
        self._reached[namespace] = self._readers_key(namespace)

    def topics_summary(self) -> str:
        """Per subscribed topic: messages received, writers matched (diagnostics)."""
        with self._changed:
            counts = {topic: len(record.items) for topic, record in self._topics.items()}
        matched: dict[str, list[int]] = {}
        for subscription in self.node.subscriptions:
            matched.setdefault(subscription.topic_name, []).append(
                subscription.get_publisher_count())
        return "; ".join(f"{topic}: {count} received, writers matched "
                         f"{matched.get(topic.split(' ', 1)[0], '?')}"
                         for topic, count in counts.items())

    def _readers_key(self, namespace: str) -> tuple:
        """What a probe round trip proves: these readers of ours, that node's result writer."""
        writers = sorted(bytes(info.endpoint_gid) for info in
                         self.node.get_publishers_info_by_topic(f"{namespace}/sam3_agent/result"))
        subscriptions = sum(1 for _ in self.node.subscriptions)
        action_clients = sum(isinstance(w, ActionClient) for w in self.node.waitables)
        return subscriptions, action_clients, tuple(writers)

    def wait_status(self, namespace: str, query_id: str, phase: str, timeout: float = 20.0):
        return self.wait_for(
            lambda: [s for s in self.statuses(namespace, query_id) if s["phase"] == phase],
            timeout, f"phase {phase} of {query_id}")

    def image_with_stamp(self, topic: str, stamp: dict, timeout: float = 10.0) -> Image:
        def find():
            found = [m for m in self.messages(topic)
                     if (m.header.stamp.sec, m.header.stamp.nanosec) == (stamp["sec"],
                                                                           stamp["nanosec"])]
            return found[-1] if found else None
        return self.wait_for(find, timeout, f"an image on {topic} stamped {stamp}")

    # --- publishing ------------------------------------------------------------------------------
    def publisher(self, topic: str, msg_type: Any = String, qos: QoSProfile = RELIABLE) -> Any:
        if topic not in self._publishers:
            self._publishers[topic] = self.node.create_publisher(msg_type, topic, qos)
        return self._publishers[topic]

    def send_query(self, namespace: str, text: str | dict, probe: bool = True) -> None:
        """Publish a query to the node of ``namespace``, first making sure its answers reach
        this harness (``wait_outputs_reach_us``; ``probe=False``: send at once)."""
        if probe:
            self.wait_outputs_reach_us(namespace)
        data = text if isinstance(text, str) else json.dumps(text)
        self.publisher(f"{namespace}/query").publish(String(data=data))

    def wait_subscribed(self, topic: str, msg_type: Any = String, timeout: float = 20.0) -> None:
        publisher = self.publisher(topic, msg_type)
        self.wait_for(lambda: publisher.get_subscription_count() > 0, timeout,
                      f"a subscriber on {topic}")

    # --- services --------------------------------------------------------------------------------
    def _call(self, srv_type: Any, name: str, request: Any, timeout: float,
              resend: bool = True) -> Any:
        """One service call. The first reply of a service just discovered can be lost (the
        server may answer before it has matched this client's reply reader): an idempotent
        request (``resend``) is sent again every few seconds until ``timeout``."""
        client = self.node.create_client(srv_type, name)
        try:
            deadline = time.monotonic() + timeout
            while not client.wait_for_service(timeout_sec=min(0.5, timeout)):
                check_nodes_alive()
                if time.monotonic() >= deadline:
                    raise TimeoutError(f"service {name} not available")
            done = threading.Event()
            futures = []
            while True:
                futures.append(client.call_async(request))
                futures[-1].add_done_callback(lambda _: done.set())
                left = deadline - time.monotonic()
                if done.wait(max(0.1, min(left, RESEND_AFTER_S) if resend else left)):
                    return next(f for f in futures if f.done()).result()
                check_nodes_alive()
                self._spinner.check()
                if not resend or time.monotonic() >= deadline:
                    raise TimeoutError(f"no answer from {name}")
        finally:
            self.node.destroy_client(client)

    def lifecycle_state(self, node_name: str, timeout: float = 10.0) -> str:
        reply = self._call(GetState, f"{node_name}/get_state", GetState.Request(), timeout)
        return reply.current_state.label

    def change_state(self, node_name: str, transition_id: int, timeout: float = 20.0) -> bool:
        """Request a transition (sent once: it is not idempotent). If its reply is lost (see
        ``_call``), the node's state tells the outcome: True once it reached the target."""
        request = ChangeState.Request()
        request.transition = Transition(id=transition_id)
        client = self.node.create_client(ChangeState, f"{node_name}/change_state")
        try:
            deadline = time.monotonic() + timeout
            while not client.wait_for_service(timeout_sec=0.5):
                check_nodes_alive()
                if time.monotonic() >= deadline:
                    raise TimeoutError(f"service {node_name}/change_state not available")
            done = threading.Event()
            future = client.call_async(request)
            future.add_done_callback(lambda _: done.set())
            target = TRANSITION_TARGETS.get(transition_id)
            while not done.wait(min(RESEND_AFTER_S, max(0.1, deadline - time.monotonic()))):
                check_nodes_alive()
                if target is not None and self.lifecycle_state(node_name) == target:
                    return True
                if time.monotonic() >= deadline:
                    return False
            return future.result().success
        finally:
            self.node.destroy_client(client)

    def wait_state(self, node_name: str, label: str, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        state = None
        while time.monotonic() < deadline:
            try:
                state = self.lifecycle_state(node_name, timeout=min(5.0, timeout))
            except TimeoutError:
                state = None
            if state == label:
                return
            check_nodes_alive()
            time.sleep(0.1)
        raise TimeoutError(f"{node_name} is {state!r}, not {label!r} after {timeout} s")

    def set_parameter(self, node_name: str, name: str, value: Any, timeout: float = 10.0):
        return self.set_parameters(node_name, {name: value}, timeout)[0]

    def set_parameters(self, node_name: str, values: dict[str, Any], timeout: float = 10.0):
        """One ``set_parameters`` request with every value (what ``ros2 param load`` sends);
        a value ``NOT_SET`` sends a parameter without a value (a request to undeclare it)."""
        request = SetParameters.Request(parameters=parameter_messages(values))
        return self._call(SetParameters, f"{node_name}/set_parameters", request,
                          timeout).results

    def set_parameters_atomically(self, node_name: str, values: dict[str, Any],
                                  timeout: float = 10.0):
        request = SetParametersAtomically.Request(parameters=parameter_messages(values))
        return self._call(SetParametersAtomically, f"{node_name}/set_parameters_atomically",
                          request, timeout).result

    def get_parameters(self, node_name: str, names: list[str], timeout: float = 10.0) -> dict:
        request = GetParameters.Request(names=names)
        reply = self._call(GetParameters, f"{node_name}/get_parameters", request, timeout)
        return {name: Parameter.from_parameter_msg(ParameterMsg(name=name, value=value)).value
                for name, value in zip(names, reply.values, strict=True)}

    def describe_parameters(self, node_name: str, names: list[str], timeout: float = 10.0):
        request = DescribeParameters.Request(names=names)
        return self._call(DescribeParameters, f"{node_name}/describe_parameters", request,
                          timeout).descriptors


NOT_SET = object()  # a parameter sent without a value (set_parameters / _atomically)
PROBE_PREFIX = "harness-probe-"  # query ids of Harness.wait_outputs_reach_us


def is_probe(query_id: str) -> bool:
    return query_id.startswith(PROBE_PREFIX)


def parameter_messages(values: dict[str, Any]) -> list[ParameterMsg]:
    return [ParameterMsg(name=name, value=ParameterValue() if value is NOT_SET else
                         Parameter(name, value=value).get_parameter_value())
            for name, value in values.items()]


def png_message(rgb: np.ndarray) -> CompressedImage:
    """An RGB image as the PNG CompressedImage a camera's compressed topic carries."""
    msg = CompressedImage(format="png")
    msg.data = cv2.imencode(".png", cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR))[1].tobytes()
    return msg


class Camera:
    """Publishes one frame message over and over (new stamp each time) in a background thread,
    like a camera driver; remembers every stamp it sent."""

    def __init__(self, harness: Harness, topic: str, msg: Any, rate_hz: float = 15.0,
                 frame_id: str = "camera", qos: QoSProfile = RELIABLE, stamp_base: int = 1000):
        self.msg = msg
        self.stamp_base = stamp_base
        self.msg.header.frame_id = frame_id
        self.publisher = harness.publisher(topic, type(msg), qos)
        self.period = 1.0 / rate_hz
        self.stamps: set[tuple[int, int]] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Camera:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        serial = 0
        while not self._stop.is_set():
            serial += 1
            # Distinct, recognisable stamps: sec = stamp_base + serial, nanosec = serial.
            stamp = (self.stamp_base + serial, serial)
            self.msg.header.stamp.sec, self.msg.header.stamp.nanosec = stamp
            self.stamps.add(stamp)
            self.publisher.publish(self.msg)
            self._stop.wait(self.period)

    def sent(self, stamp: dict) -> bool:
        return (stamp["sec"], stamp["nanosec"]) in self.stamps


TRANSITION = Transition  # re-export for tests (Transition.TRANSITION_DEACTIVATE ...)
# The state a successful transition ends in (change_state's check when a reply is lost).
TRANSITION_TARGETS = {Transition.TRANSITION_CONFIGURE: "inactive",
                      Transition.TRANSITION_CLEANUP: "unconfigured",
                      Transition.TRANSITION_ACTIVATE: "active",
                      Transition.TRANSITION_DEACTIVATE: "inactive"}

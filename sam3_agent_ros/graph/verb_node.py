"""One short-lived rclpy start-up for the CLI verbs (``ask``, ``param``, ``lifecycle``,
``record``, ``replay``, ...): a context of its own, one node, a clean shutdown.

    with verb_node("sam3_agent_cli", loopback=args.loopback) as ros:
        ... ros.node ...

- rclpy does not parse ``sys.argv`` (the verb's argparse has it): no rcl warning about a verb's
  own ``OLD:=NEW`` arguments.
- ``loopback``: DDS stays on this host (``dds.apply_loopback_env``) before rclpy starts.
- rclpy's own signal handlers are never installed (they would shut the context down under a
  wait): Ctrl-C stays a ``KeyboardInterrupt`` unless ``stop_signals`` names SIGINT; each signal of
  ``stop_signals`` only sets ``ros.stop`` (the verb then ends its wait, cancels what it started
  and returns), and the previous handlers are back when the block ends.
- ``ros.spinning(threads=1)``: an executor spinning the node in a thread until ``ros.stop`` is
  set or the block ends (for verbs whose callbacks must run while the main thread waits).
An object that lives longer than one block (a demo's listener) holds both in a
``contextlib.ExitStack``: ``enter_context(verb_node(...))`` when made,
``enter_context(ros.spinning(n))`` when started, ``close()`` at the end.

rclpy is imported only when a node is made (the commands' modules stay importable without it).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rclpy.context import Context
    from rclpy.executors import Executor
    from rclpy.node import Node

SPIN_SLICE_S = 0.1  # the spinning thread looks at ``stop`` this often
JOIN_S = 5.0  # how long the end of ``spinning`` waits for that thread


class ShortLived:
    """The node of one CLI verb, its context, and the event its stop signals set."""

    def __init__(self, node: Node, context: Context, stop: threading.Event) -> None:
        self.node = node
        self.context = context
        self.stop = stop

    @contextmanager
    def spinning(self, threads: int = 1) -> Iterator[None]:
        """Spin the node on an executor of its own (``threads`` > 1: a multi-threaded one) in a
        thread, until ``stop`` or the end of the block (which sets ``stop``)."""
        from rclpy.executors import MultiThreadedExecutor, SingleThreadedExecutor

        executor = (MultiThreadedExecutor(num_threads=threads, context=self.context)
                    if threads > 1 else SingleThreadedExecutor(context=self.context))
        executor.add_node(self.node)
        spinner = threading.Thread(target=self._spin, args=(executor,), daemon=True,
                                   name=f"{self.node.get_name()}-spin")
        spinner.start()
        try:
            yield
        finally:
            self.stop.set()
            spinner.join(timeout=JOIN_S)
            executor.shutdown(timeout_sec=1.0)

    def _spin(self, executor: Executor) -> None:
        while not self.stop.is_set() and self.context.ok():
            try:
                executor.spin_once(timeout_sec=SPIN_SLICE_S)
            except Exception:  # a wait that failed because the block is ending: quietly done
                if self.stop.is_set() or not self.context.ok():
                    return
                raise


@contextmanager
def verb_node(name: str, loopback: bool = False,
                     stop_signals: tuple[signal.Signals, ...] = ()) -> Iterator[ShortLived]:
    """An rclpy node ``name`` in a context of its own, shut down when the block ends."""
    if loopback:
        from sam3_agent_ros.ros.dds import apply_loopback_env

        apply_loopback_env()
    import rclpy
    from rclpy.signals import SignalHandlerOptions

    context = rclpy.Context()
    # args=[]: the verb's own command line is not rcl's to read (``replay --remap OLD:=NEW``
    # made rcl warn "This syntax is deprecated" about an argument that was never a ROS one).
    rclpy.init(args=[], context=context, signal_handler_options=SignalHandlerOptions.NO)
    stop = threading.Event()
    previous: dict[signal.Signals, Any] = {}
    node = None
    try:
        node = rclpy.create_node(name, context=context)
        for sig in stop_signals:
            previous[sig] = signal.getsignal(sig)
            signal.signal(sig, lambda *_: stop.set())
        yield ShortLived(node, context, stop)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown(context=context)

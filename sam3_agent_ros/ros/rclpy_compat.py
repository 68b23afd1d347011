"""rclpy calls whose API differs between the ROS 2 distributions this package supports.

Humble and Jazzy ship rclpy 3.x / 7.x, Kilted rclpy 9.x. Since rclpy 8, ``rclpy.init()`` returns a
context manager (``with rclpy.init(): ...``); before, it returns None, and ``with rclpy.init()``
raises ``TypeError: 'NoneType' object does not support the context manager protocol``.
``initialized`` gives the same ``with`` form on all of them, using only calls they all have
(``rclpy.init`` and ``rclpy.try_shutdown``). ``InitFailed`` is what ``rclpy.init`` raises (an
``RCLError`` on every distribution) when rcl refuses the arguments, e.g. a params file it cannot
parse.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import rclpy
from rclpy.context import Context
from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy


class InitFailed(RuntimeError):
    """``rclpy.init`` failed (rcl's reason, on one line)."""


@contextmanager
def initialized(args: Sequence[str] | None = None, context: Context | None = None,
                **init_options: Any) -> Iterator[Context]:
    """Initialise rclpy (``context`` None: the default context), yield the context, and shut it
    down on the way out, whatever happens inside (exception, Ctrl-C, a shutdown from elsewhere).

    ``init_options`` go to ``rclpy.init`` as they are (``domain_id``, ``signal_handler_options``).
    """
    try:
        rclpy.init(args=None if args is None else list(args), context=context, **init_options)
    except _rclpy.RCLError as exc:
        raise InitFailed(" ".join(str(exc).split())) from exc
    try:
        yield context if context is not None else rclpy.get_default_context()
    finally:
        rclpy.try_shutdown(context=context)

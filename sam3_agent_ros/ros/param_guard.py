"""A peer's parameter set never takes the node down: what raises while a set is checked becomes
a refusal with the reason (``check_failed_reason``; ``params.ReadOnlyParameters`` uses it for
every set, in-process ones included), and ``guard_parameter_services`` covers what rclpy's
parameter services do before the node's code runs (reading the request: a value of an unknown
type raises ``ValueError`` there, which would end the spin)."""

from __future__ import annotations

import threading
from typing import Any

from rcl_interfaces.msg import SetParametersResult

from sam3_agent_ros.core.untrusted_text import for_log
from sam3_agent_ros.log_limit import limiter_of
from sam3_agent_ros.redact import redact_text


def check_failed_reason(names: list[str], exc: BaseException) -> str:
    """The refusal of a set whose check raised (``RecursionError``, ``MemoryError``, a bug):
    names the parameters and the error, escaped and bounded (the error may quote the value)."""
    return for_log(f"{', '.join(names)}: refused, the value could not be checked "
                   f"({type(exc).__name__}: {redact_text(str(exc))})", 300)


_LOGGED = threading.local()  # the reason of the refusal this thread logged last (logged once)


def log_refusal(node: Any, reason: str) -> None:
    """``parameter change refused: REASON`` (redacted), at most as often as the node's limiter
    allows: a peer can send refused sets in a loop."""
    _LOGGED.reason = reason
    limiter_of(node).emit("parameter change refused", node.get_logger().warning,
                          lambda: f"parameter change refused: {redact_text(reason)}")


def refusal_logged(reason: str) -> bool:
    """Whether this thread's last ``log_refusal`` was for ``reason``."""
    return getattr(_LOGGED, "reason", None) == reason


def forget_logged() -> None:
    _LOGGED.reason = None


def refusing(node: Any, callback: Any) -> Any:
    """An on-set-parameters callback that answers a refusal with the reason where ``callback``
    raises."""
    def checked(changes: list[Any]) -> SetParametersResult:
        try:
            return callback(changes)
        except Exception as exc:  # noqa: BLE001 (a peer's value must not end the spin)
            return refusal(node, [getattr(c, "name", "?") for c in changes], exc)
    return checked


def refusal(node: Any, names: list[str], exc: BaseException) -> SetParametersResult:
    """``check_failed_reason`` as a refusal, logged as a warning."""
    reason = check_failed_reason(names, exc)
    log_refusal(node, reason)
    return SetParametersResult(successful=False, reason=reason)


def guard_parameter_services(node: Any) -> None:
    """Wrap the node's ``set_parameters`` / ``set_parameters_atomically`` service callbacks so
    that what raises before the node's own code (rclpy reading a value of an unknown type) is
    answered as a refusal instead of ending the spin. Uses ``Service.callback`` (rclpy keeps the
    callback there and the executor calls it)."""
    for service in list(getattr(node, "services", ())):
        name = getattr(service, "srv_name", "")
        if name.endswith("/set_parameters") or name.endswith("/set_parameters_atomically"):
            service.callback = _guarded(node, service.callback,
                                        atomic=name.endswith("_atomically"))


def _guarded(node: Any, callback: Any, atomic: bool) -> Any:
    def guarded(request: Any, response: Any) -> Any:
        try:
            return callback(request, response)
        except Exception as exc:  # noqa: BLE001 (anything a peer's request makes rclpy raise)
            refused = refusal(node, [for_log(p.name, 100) for p in request.parameters], exc)
            if atomic:
                response.result = refused
            else:  # one result per parameter: those already answered keep theirs
                done = list(response.results)[:len(request.parameters)]
                response.results = done + [refused] * (len(request.parameters) - len(done))
            return response
    return guarded

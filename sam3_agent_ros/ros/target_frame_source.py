"""The TF source of a configured node with ``target_frame`` set (CONTRACTS §9): made once per
configure (tf2_ros where it imports, else our own listener, ``ros/tf_listener.py``, imported
only then), wrapped in the ``TargetFrameRequest`` every 3D step uses, closed at cleanup; the
``target frame`` status of ``/diagnostics`` follows it."""

from __future__ import annotations

from typing import Any

from sam3_agent_ros.config import Config
from sam3_agent_ros.health.recorder import HealthRecorder
from sam3_agent_ros.pipeline.target_frame import TargetFrameRequest


def start_target_frame(node: Any, config: Config,
                       recorder: HealthRecorder) -> TargetFrameRequest | None:
    """With ``target_frame`` set (CONTRACTS §9): the TF source (tf2_ros, else our own listener
    on /tf and /tf_static), once per configure, and the request every 3D step uses; None
    without it. ``recorder`` shows the ``target frame`` status."""
    frame_id = config.node.target_frame
    recorder.target_frame_started(frame_id)
    if not frame_id:
        return None
    from sam3_agent_ros.ros.tf_listener import create_tf_source

    source = create_tf_source(node)
    recorder.target_frame_started(frame_id, source.stats)  # what the listener refused
    return TargetFrameRequest(frame_id, source, config.tf.timeout_s)


def stop_target_frame(request: TargetFrameRequest | None, recorder: HealthRecorder,
                      logger: Any) -> None:
    """Close the TF source of ``start_target_frame`` (cleanup); never raises."""
    recorder.target_frame_started("")
    close = getattr(getattr(request, "transforms", None), "close", None)
    if callable(close):
        try:
            close()
        except Exception as exc:  # noqa: BLE001 (teardown goes on)
            logger.warning(f"closing the TF listener failed: {exc}")

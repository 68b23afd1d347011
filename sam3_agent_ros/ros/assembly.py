"""What the node's configure builds first (the backends, the agent) and what its cleanup frees.

``build_agent`` checks what the configuration needs first (milliseconds: endpoint, key, SAM 3
weights), then builds the LLM client, the segmenter (SAM 3 loads for seconds to minutes) and the
``Agent`` behind a ``SegmenterGate``. Any failure raises ``CannotConfigure`` once its lines are
logged; the node stays unconfigured and says why (the configure transition fails).
``release`` stops the node's threads and frees the models (cleanup, shutdown, error, exit).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sam3_agent_ros.config import Config, demo_backends_warning, offline_overrides
from sam3_agent_ros.redact import redact_text
from sam3_agent_ros.ros import health, hints
from sam3_agent_ros.ros.concepts_control import SHUTDOWN_WAIT_S as CONCEPTS_SHUTDOWN_WAIT_S
from sam3_agent_ros.ros.follow_control import SHUTDOWN_WAIT_S as FOLLOW_SHUTDOWN_WAIT_S

if TYPE_CHECKING:
    from sam3_agent_ros.concepts import SegmenterGate
    from sam3_agent_ros.core.agent import Agent
    from sam3_agent_ros.pipeline.query_life import QueryLife
    from sam3_agent_ros.pipeline.query_runner import QueryRunner
    from sam3_agent_ros.pipeline.target_frame import TargetFrameRequest
    from sam3_agent_ros.ros.concepts_control import ConceptsControl
    from sam3_agent_ros.ros.follow_control import FollowControl
    from sam3_agent_ros.ros.outputs import AnswerPublisher

# Appended to every "cannot configure" line about a missing endpoint, key or checkpoint.
TRY_OFFLINE = ("to try without a model: ros2 launch sam3_agent_ros sam3_agent.launch.py "
               "offline:=true, or " + " ".join(f"-p {o}" for o in offline_overrides()))


class CannotConfigure(Exception):
    """The backends cannot be built; ``problem`` is what /diagnostics reports (logged already);
    ``by_building``: they failed while being built (not for want of a requirement)."""

    def __init__(self, problem: str, by_building: bool):
        super().__init__(problem)
        self.problem = problem
        self.by_building = by_building


def build_agent(config: Config, recorder: health.HealthRecorder, logger: Any,
                node_name: str) -> tuple[Agent, SegmenterGate]:
    """The agent (the LLM observed by ``recorder``) and the gate in front of the segmenter
    (the agent and follow mode first, the standing concepts between)."""
    from sam3_agent_ros.backends import (
        close_quietly,
        make_llm,
        make_segmenter,
        missing_requirements,
    )
    from sam3_agent_ros.concepts import SegmenterGate
    from sam3_agent_ros.core.agent import Agent
    from sam3_agent_ros.core.answers import AnswerStore

    missing = missing_requirements(config)  # milliseconds: before anything slow
    if missing:
        for problem in missing:
            logger.error(f"cannot configure: {problem}; {TRY_OFFLINE}")
        raise CannotConfigure("; ".join(missing), by_building=False)
    demo = demo_backends_warning(config.to_params())
    if demo:
        logger.warning(demo)
    logger.info(
        f"configuring: llm.backend={config.llm.backend} segmenter.backend="
        f"{config.segmenter.backend} (building the backends; SAM 3 may take a while)")
    segmenter = None
    try:
        llm = health.ObservedLlm(make_llm(config), recorder)
        segmenter = make_segmenter(config)
        gate = SegmenterGate(segmenter)
        agent = Agent(config, llm=llm, segmenter=gate.first,
                      answers=AnswerStore(config.refine.keep_answers,
                                          config.refine.max_kept_mib * 2**20))
    except Exception as exc:  # any backend failure: stay unconfigured, say why
        close_quietly(segmenter)
        problem = (f"cannot build the backends: {type(exc).__name__}: "
                   f"{redact_text(str(exc))}")
        logger.error(problem)
        logger.error(f"to configure: {hints.fix_backends(node_name)}")
        raise CannotConfigure(problem, by_building=True) from None
    return agent, gate


def start_target_frame(node: Any, config: Config,
                       recorder: health.HealthRecorder) -> TargetFrameRequest | None:
    """With ``target_frame`` set (CONTRACTS §9): the TF source (tf2_ros, else our own listener
    on /tf and /tf_static), once per configure, and the request every 3D step uses; None
    without it. ``recorder`` shows the ``target frame`` status."""
    frame_id = config.node.target_frame
    recorder.target_frame_started(frame_id)
    if not frame_id:
        return None
    from sam3_agent_ros.pipeline.target_frame import TargetFrameRequest
    from sam3_agent_ros.ros.tf_listener import create_tf_source

    return TargetFrameRequest(frame_id, create_tf_source(node), config.tf.timeout_s)


def stop_target_frame(life: QueryLife, recorder: health.HealthRecorder, logger: Any) -> None:
    """Close the TF source of ``start_target_frame`` (cleanup); never raises."""
    request, life.target_frame = life.target_frame, None
    recorder.target_frame_started("")
    close = getattr(getattr(request, "transforms", None), "close", None)
    if callable(close):
        try:
            close()
        except Exception as exc:  # noqa: BLE001 (teardown goes on)
            logger.warning(f"closing the TF listener failed: {exc}")


def release(life: QueryLife, runner: QueryRunner | None, follow: FollowControl | None,
            concepts: ConceptsControl | None, outputs: AnswerPublisher | None, *,
            wait_s: float, logger: Any) -> None:
    """Stop the worker, follow and concepts threads (each waited for up to ``wait_s``, the
    follow and concepts threads at most their own shutdown wait) and free the models unless
    one of them is still busy with the segmenter. The outputs go last: a query cancelled while
    the worker stops still publishes its one result."""
    life.runner = None
    worker_done = runner.stop("node shutting down", wait_s) if runner is not None else True
    life.follow = None
    follow_done = (follow.destroy(min(wait_s, FOLLOW_SHUTDOWN_WAIT_S))
                   if follow is not None else True)
    concepts_done = (concepts.destroy(min(wait_s, CONCEPTS_SHUTDOWN_WAIT_S))
                     if concepts is not None else True)
    agent, life.agent = life.agent, None
    close = getattr(getattr(agent, "segmenter", None), "close", None)
    if callable(close) and worker_done and follow_done and concepts_done:
        try:
            close()
        except Exception as exc:
            logger.warning(f"segmenter close failed: {exc}")
    life.outputs = None
    if outputs is not None:
        outputs.destroy()
    life.max_query_chars = 0

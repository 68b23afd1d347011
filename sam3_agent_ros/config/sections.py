"""The typed config sections (one frozen dataclass per parameter prefix) and ``Config``, which
validates a flat ``{name: value}`` mapping into them.

Every field's name, type and default come from ``PARAMETERS`` (``_default`` reads the table; a
test checks that each parameter is exactly one field of its section, of its type); the
descriptions and ranges live only in the table.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from sam3_agent_ros import param_values
from sam3_agent_ros.config import llm_requests
from sam3_agent_ros.config.table import PARAMETERS, PARAMETERS_BY_NAME, unknown_parameter_message
from sam3_agent_ros.param_values import ConfigError


def _default(name: str) -> Any:
    return PARAMETERS_BY_NAME[name].default


@dataclass(frozen=True)
class LlmConfig:
    """LLM endpoint settings (llm.*)."""

    backend: str = _default("llm.backend")
    base_url: str = _default("llm.base_url")
    model: str = _default("llm.model")
    api_key_env: str = _default("llm.api_key_env")
    timeout_s: float = _default("llm.timeout_s")
    max_retries: int = _default("llm.max_retries")
    temperature: float = _default("llm.temperature")
    max_tokens: int = _default("llm.max_tokens")
    protocol: str = _default("llm.protocol")
    offline_think_s: float = _default("llm.offline_think_s")
    priority: int = _default("llm.priority")
    extra_body: str = _default("llm.extra_body")
    extra_headers: str = _default("llm.extra_headers")
    max_in_flight: int = _default("llm.max_in_flight")
    retry_jitter: float = _default("llm.retry_jitter")


@dataclass(frozen=True)
class SegmenterConfig:
    """Segmenter settings (segmenter.*)."""

    backend: str = _default("segmenter.backend")
    checkpoint: str = _default("segmenter.checkpoint")
    device: str = _default("segmenter.device")
    dtype: str = _default("segmenter.dtype")
    engine: str = _default("segmenter.engine")
    engine_dir: str = _default("segmenter.engine_dir")
    confidence_threshold: float = _default("segmenter.confidence_threshold")
    overlap_threshold: float = _default("segmenter.overlap_threshold")
    min_mask_area: int = _default("segmenter.min_mask_area")
    bpe_path: str = _default("segmenter.bpe_path")
    random_weights: bool = _default("segmenter.random_weights")


@dataclass(frozen=True)
class AgentConfig:
    """Agent loop bounds (agent.*)."""

    max_rounds: int = _default("agent.max_rounds")
    max_context_messages: int = _default("agent.max_context_messages")
    max_image_side: int = _default("agent.max_image_side")
    examine_concurrency: int = _default("agent.examine_concurrency")
    query_timeout_s: float = _default("agent.query_timeout_s")
    max_consecutive_mistakes: int = _default("agent.max_consecutive_mistakes")
    verifier_retries: int = _default("agent.verifier_retries")
    max_masks_in_table: int = _default("agent.max_masks_in_table")
    status_reasoning_chars: int = _default("agent.status_reasoning_chars")
    max_verifier_calls: int = _default("agent.max_verifier_calls")
    max_text_prompt_chars: int = _default("agent.max_text_prompt_chars")
    prompts_dir: str = _default("agent.prompts_dir")


@dataclass(frozen=True)
class DepthConfig:
    """3D target settings (depth.*)."""

    enabled: bool = _default("depth.enabled")
    max_stamp_diff_s: float = _default("depth.max_stamp_diff_s")
    min_m: float = _default("depth.min_m")
    max_m: float = _default("depth.max_m")
    erode_px: int = _default("depth.erode_px")
    min_valid_pixels: int = _default("depth.min_valid_pixels")
    statistic: str = _default("depth.statistic")
    rectified: bool = _default("depth.rectified")
    buffer_size: int = _default("depth.buffer_size")
    buffer_mib: int = _default("depth.buffer_mib")
    cloud_max_points: int = _default("depth.cloud_max_points")


@dataclass(frozen=True)
class SceneConfig:
    """The grasp scene: reaching boxes, collision objects, the labelled cloud (scene.*)."""

    enabled: bool = _default("scene.enabled")
    crop_scale: float = _default("scene.crop_scale")
    crop_min_m: float = _default("scene.crop_min_m")


@dataclass(frozen=True)
class GraspConfig:
    """Parallel-jaw grasps of the target (grasp.*)."""

    max_width_m: float = _default("grasp.max_width_m")
    clearance_m: float = _default("grasp.clearance_m")


@dataclass(frozen=True)
class TfConfig:
    """Transform lookups into target_frame (tf.*)."""

    timeout_s: float = _default("tf.timeout_s")


@dataclass(frozen=True)
class FollowConfig:
    """Follow mode settings (follow.*)."""

    default: bool = _default("follow.default")
    mode: str = _default("follow.mode")
    lost_timeout_s: float = _default("follow.lost_timeout_s")
    redetect_every: int = _default("follow.redetect_every")
    reground_on_lost: bool = _default("follow.reground_on_lost")
    flow_max_side: int = _default("follow.flow_max_side")
    redetect_on_drop: float = _default("follow.redetect_on_drop")
    match_min_iou: float = _default("follow.match_min_iou")
    match_max_shift: float = _default("follow.match_max_shift")


@dataclass(frozen=True)
class ActionConfig:
    """Action server settings (action.*)."""

    result_timeout_s: int = _default("action.result_timeout_s")
    max_results_with_images: int = _default("action.max_results_with_images")


@dataclass(frozen=True)
class RefineConfig:
    """Refinement settings (refine.*)."""

    keep_answers: int = _default("refine.keep_answers")
    max_kept_mib: int = _default("refine.max_kept_mib")


@dataclass(frozen=True)
class ConceptsConfig:
    """Standing concepts (concepts.*)."""

    prompts: tuple[str, ...] = _default("concepts.prompts")
    rate_hz: float = _default("concepts.rate_hz")
    max_prompts: int = _default("concepts.max_prompts")
    max_prompt_chars: int = _default("concepts.max_prompt_chars")


@dataclass(frozen=True)
class OverlayConfig:
    """Published overlay settings (overlay.*)."""

    max_side: int = _default("overlay.max_side")
    jpeg_quality: int = _default("overlay.jpeg_quality")


@dataclass(frozen=True)
class NodeConfig:
    """ROS node settings (un-prefixed parameters)."""

    autostart: bool = _default("autostart")
    image_transport: str = _default("image_transport")
    image_qos: str = _default("image_qos")
    max_frame_age_s: float = _default("max_frame_age_s")
    frame_wait_s: float = _default("frame_wait_s")
    query_policy: str = _default("query_policy")
    queue_size: int = _default("queue_size")
    max_query_chars: int = _default("max_query_chars")
    publish_overlay: bool = _default("publish_overlay")
    max_image_pixels: int = _default("max_image_pixels")
    target_frame: str = _default("target_frame")


# The prefixed sections, by prefix; the un-prefixed parameters make ``NodeConfig``.
SECTIONS: dict[str, type] = {"llm": LlmConfig, "segmenter": SegmenterConfig,
                             "agent": AgentConfig, "depth": DepthConfig, "follow": FollowConfig,
                             "action": ActionConfig, "refine": RefineConfig,
                             "concepts": ConceptsConfig, "overlay": OverlayConfig,
                             "tf": TfConfig, "scene": SceneConfig, "grasp": GraspConfig}


def _keys(prefix: str) -> list[str]:
    return [p.name[len(prefix) + 1:] for p in PARAMETERS if p.name.startswith(prefix + ".")]


@dataclass(frozen=True)
class Config:
    """All settings. Field docs live in ``PARAMETERS`` (one description per parameter)."""

    llm: LlmConfig = field(default_factory=LlmConfig)
    segmenter: SegmenterConfig = field(default_factory=SegmenterConfig)
    agent: AgentConfig = field(default_factory=AgentConfig)
    depth: DepthConfig = field(default_factory=DepthConfig)
    follow: FollowConfig = field(default_factory=FollowConfig)
    action: ActionConfig = field(default_factory=ActionConfig)
    refine: RefineConfig = field(default_factory=RefineConfig)
    concepts: ConceptsConfig = field(default_factory=ConceptsConfig)
    overlay: OverlayConfig = field(default_factory=OverlayConfig)
    tf: TfConfig = field(default_factory=TfConfig)
    scene: SceneConfig = field(default_factory=SceneConfig)
    grasp: GraspConfig = field(default_factory=GraspConfig)
    node: NodeConfig = field(default_factory=NodeConfig)

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> Config:
        """Validate a flat ``{"llm.model": ..., "autostart": ...}`` mapping; unknown names fail."""
        values = {p.name: p.default for p in PARAMETERS}
        for name, value in params.items():
            param = PARAMETERS_BY_NAME.get(name)
            if param is None:
                raise ConfigError(unknown_parameter_message(name))
            values[name] = param.validate(value)
        if values["depth.min_m"] >= values["depth.max_m"]:
            raise ConfigError("depth.min_m must be below depth.max_m")
        if values["llm.protocol"] == "tools" and values["agent.max_context_messages"] < 5:
            raise ConfigError("agent.max_context_messages must be at least 5 with llm.protocol "
                              "'tools' (a tool result takes 3 messages: call, tool, image)")
        llm_requests.extra_body(values["llm.extra_body"])  # ConfigError with the reason
        llm_requests.extra_headers(values["llm.extra_headers"])
        problem = concepts_problem(values["concepts.prompts"], values["concepts.max_prompts"],
                                   values["concepts.max_prompt_chars"])
        if problem:
            raise ConfigError(problem)
        sections: dict[str, Any] = {}
        for prefix, klass in SECTIONS.items():
            sections[prefix] = klass(**{k: values[f"{prefix}.{k}"] for k in _keys(prefix)})
        sections["node"] = NodeConfig(**{p.name: values[p.name] for p in PARAMETERS
                                         if "." not in p.name})
        return cls(**sections)

    @property
    def backends(self) -> dict[str, str]:
        """``{"llm": ..., "segmenter": ...}``: see ``backends_of`` (same pairs, no flattening)."""
        return {"llm": self.llm.backend, "segmenter": self.segmenter.backend}

    def to_params(self) -> dict[str, Any]:
        """The flat mapping back (for logs and tests)."""
        out: dict[str, Any] = {}
        for prefix in SECTIONS:
            for key, value in dataclasses.asdict(getattr(self, prefix)).items():
                out[f"{prefix}.{key}"] = value
        out.update(dataclasses.asdict(self.node))
        return out


def concepts_problem(prompts: tuple[str, ...], max_prompts: int, max_chars: int) -> str | None:
    """Why a list of standing concepts is refused (bounded like every input a peer can set:
    count, and length as given, padding included; printable text, no repeats), or None."""
    if len(prompts) > max_prompts:
        return (f"concepts.prompts: {len(prompts)} concepts, more than concepts.max_prompts "
                f"({max_prompts})")
    seen: set[str] = set()
    for number, prompt in enumerate(prompts, start=1):
        if len(prompt) > max_chars:  # the raw text: before any strip
            return (f"concepts.prompts: concept {number} has {len(prompt)} characters, more "
                    f"than concepts.max_prompt_chars ({max_chars})")
        text = prompt.strip()
        if not text:
            return f"concepts.prompts: concept {number} is empty"
        if not text.isprintable():
            return f"concepts.prompts: concept {number} holds control characters"
        if text.lower() in seen:
            return f"concepts.prompts: {param_values.shown(text, 40)} is listed twice"
        seen.add(text.lower())
    return None



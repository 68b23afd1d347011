"""The one configuration object, shared by the ROS node, the YAML files and the CLI.

Every parameter is declared once in ``PARAMETERS`` (``table.py``: name, default, description,
allowed values or range; ``parameter.py``: the check of one value). The node declares ROS
parameters from this table, the CLI parses ``-p name:=value`` against it (``params_files.py``),
and ``Config.from_params`` validates a flat ``{name: value}`` mapping into the typed sections of
``sections.py``. Everything is imported from here (``from sam3_agent_ros.config import ...``).
"""

from __future__ import annotations

from typing import Any

from sam3_agent_ros.config.parameter import Parameter
from sam3_agent_ros.config.params_files import flatten, load_params_file, nest, parse_override
from sam3_agent_ros.config.sections import (
    SECTIONS,
    ActionConfig,
    AgentConfig,
    ConceptsConfig,
    Config,
    DepthConfig,
    FollowConfig,
    GraspConfig,
    LlmConfig,
    NodeConfig,
    OverlayConfig,
    RefineConfig,
    SceneConfig,
    SegmenterConfig,
    TfConfig,
    concepts_problem,
)
from sam3_agent_ros.config.table import (
    NODE_NAME,
    OFFLINE_BACKENDS,
    PARAMETERS,
    PARAMETERS_BY_NAME,
    READ_ONLY_NOTE,
    unknown_parameter_message,
)
from sam3_agent_ros.param_values import ConfigError

__all__ = [
    "NODE_NAME", "OFFLINE_BACKENDS", "PARAMETERS", "PARAMETERS_BY_NAME", "READ_ONLY_NOTE",
    "SECTIONS", "ActionConfig", "AgentConfig", "ConceptsConfig", "Config", "ConfigError",
    "DepthConfig", "FollowConfig", "GraspConfig", "LlmConfig", "NodeConfig", "OverlayConfig",
    "Parameter", "RefineConfig", "SceneConfig", "SegmenterConfig", "TfConfig", "backends_of",
    "concepts_problem",
    "demo_backends_warning",
    "flatten", "load_params_file", "nest", "offline_overrides", "parse_override",
    "unknown_parameter_message",
]


def offline_overrides() -> list[str]:
    """``OFFLINE_BACKENDS`` as ``NAME:=VALUE`` overrides (``-p`` arguments)."""
    return [f"{name}:={value}" for name, value in OFFLINE_BACKENDS.items()]


def backends_of(params: dict[str, Any]) -> dict[str, str]:
    """What answers, for the result and status JSON (interface §6): ``{"llm": "openai",
    "segmenter": "sam3"}``; a plugin segmenter shows its ``package.module:factory`` spec."""
    return {"llm": str(params["llm.backend"]), "segmenter": str(params["segmenter.backend"])}


def demo_backends_warning(params: dict[str, Any]) -> str | None:
    """The start-up warning when a demo backend of ``OFFLINE_BACKENDS`` is chosen, else None."""
    chosen = [f"{name}={value}" for name, value in OFFLINE_BACKENDS.items()
              if params.get(name) == value]
    if not chosen:
        return None
    return (f"DEMO BACKENDS ({', '.join(chosen)}): answers come from the built-in offline demo "
            "backends (scripted planner, colour thresholds), not from a model. For real answers "
            "use llm.backend openai and segmenter.backend sam3 (the defaults).")

"""Builds the LLM client and the segmenter named by the configuration."""

from __future__ import annotations

import contextlib
import importlib

from sam3_agent_ros.config import Config, ConfigError
from sam3_agent_ros.core.errors import SegmenterError
from sam3_agent_ros.core.ports import LlmClient, Segmenter


def make_llm(config: Config) -> LlmClient:
    if config.llm.backend == "offline":
        from sam3_agent_ros.llm.offline import OfflinePlanner

        return OfflinePlanner()
    from sam3_agent_ros.llm.openai_client import OpenAiClient

    return OpenAiClient(config.llm, config.agent.max_image_side)


def make_segmenter(config: Config) -> Segmenter:
    """May take long (SAM 3 loads its weights); raises ConfigError/SegmenterError with a fix."""
    backend = config.segmenter.backend
    if backend == "color":
        from sam3_agent_ros.segmenters.color import ColorSegmenter

        return ColorSegmenter()
    if backend == "sam3":
        from sam3_agent_ros.segmenters.sam3 import Sam3Segmenter

        return Sam3Segmenter(config.segmenter)
    return load_plugin(backend)


def load_plugin(spec: str) -> Segmenter:
    """``"package.module:factory"`` -> ``factory()`` (CONTRACTS §3)."""
    module_name, _, factory_name = spec.partition(":")
    if not module_name or not factory_name:
        raise ConfigError(f"segmenter.backend {spec!r}: expected 'package.module:factory'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"segmenter plugin {spec!r}: cannot import {module_name!r} ({exc})"
                          ) from None
    factory = getattr(module, factory_name, None)
    if not callable(factory):
        raise ConfigError(f"segmenter plugin {spec!r}: {module_name} has no callable "
                          f"{factory_name!r}")
    try:
        segmenter = factory()
    except Exception as exc:
        raise SegmenterError(f"segmenter plugin {spec!r}: factory() failed: "
                             f"{type(exc).__name__}: {exc}") from exc
    if not callable(getattr(segmenter, "segment", None)):
        raise ConfigError(f"segmenter plugin {spec!r}: factory() returned an object without "
                          "a segment(image, text_prompt) method")
    return segmenter


def close_quietly(obj) -> None:
    close = getattr(obj, "close", None)
    if callable(close):
        with contextlib.suppress(Exception):  # closing must never take the caller down
            close()

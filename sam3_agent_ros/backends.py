"""Builds the LLM client and the segmenter named by the configuration, after checking in
milliseconds that what they need exists (``missing_requirements``)."""

from __future__ import annotations

import contextlib
import importlib
import os
from collections.abc import Mapping
from urllib.parse import urlsplit

from sam3_agent_ros.config import Config, ConfigError
from sam3_agent_ros.core.errors import SegmenterError
from sam3_agent_ros.core.ports import LlmClient, Segmenter


def missing_requirements(config: Config, environ: Mapping[str, str] | None = None) -> list[str]:
    """What the chosen backends need and lack, one line each naming the fix; empty when nothing
    is missing. Cheap (no model, no network, no torch import): callers check it before building.

    - ``llm.backend: openai``: ``llm.base_url`` is an http(s) URL, and the variable named by
      ``llm.api_key_env`` is set (in ``environ``, default ``os.environ``). Whether the endpoint
      answers is deliberately not checked: a robot may start before its model server (vLLM
      takes minutes to load a model), and a probe would leave the node unconfigured after a
      transient outage; a query on an unreachable endpoint fails with that reason instead.
    - ``segmenter.backend: sam3``: ``segmenters.sam3_files.check_loadable`` (packages, vocabulary,
      checkpoint file or Hugging Face weights).
    """
    environ = os.environ if environ is None else environ
    problems = []
    if config.llm.backend == "openai":
        problems += _openai_problems(config.llm, environ)
    if config.segmenter.backend == "sam3":
        from sam3_agent_ros.segmenters.sam3_files import check_loadable

        try:
            check_loadable(config.segmenter)
        except (ConfigError, SegmenterError) as exc:
            problems.append(str(exc))
    return problems


def _openai_problems(llm, environ: Mapping[str, str]) -> list[str]:
    problems = []
    url = llm.base_url.strip()
    if not url:
        problems.append("llm.base_url is empty: set it to your OpenAI-compatible endpoint, e.g. "
                        "http://127.0.0.1:8000/v1 (vLLM) or https://api.openai.com/v1")
    else:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            problems.append("llm.base_url is not an http(s) URL: write it as "
                            "http://HOST:PORT/v1 (e.g. http://gpu-box:8000/v1)")
    name = llm.api_key_env
    if name and not environ.get(name):
        state = "is empty" if name in environ else "is not set"
        problems.append(f"the API key variable {name} (llm.api_key_env) {state}: export "
                        f"{name}=<your key> before starting; a server without authentication "
                        f"(e.g. vLLM) accepts any value: export {name}=EMPTY")
    return problems


def base_url_credentials_problem(base_url: str, api_key_env: str) -> str | None:
    """The start-up refusal of credentials written into ``llm.base_url`` (user info, or a
    key-like query parameter: what ``redact.py`` hides), with the way to pass the key; None when
    the URL carries none. A parameter is readable by every peer of the node (its parameter
    services) and is written into logs and results: a secret never goes there."""
    from sam3_agent_ros.redact import has_credentials, redact_text

    if not has_credentials(base_url):
        return None
    name = api_key_env or "OPENAI_API_KEY"
    how = f"export {name}=<key>" if api_key_env else \
        f"set llm.api_key_env to {name} and export {name}=<key>"
    return (f"llm.base_url {redact_text(base_url)} carries credentials (user info or a key-like "
            "query parameter), which any peer could read from the node's parameters: remove "
            "them from the URL and put the API key in the environment variable named by "
            f"llm.api_key_env ({how})")


def make_llm(config: Config) -> LlmClient:
    if config.llm.backend == "offline":
        from sam3_agent_ros.llm.offline import OfflinePlanner

        return OfflinePlanner(config.llm.offline_think_s)
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


def describe_backends(config: Config, segmenter: object) -> dict[str, str]:
    """What answers, for the result and status JSON: ``config.backends`` plus what the segmenter
    says runs it (``engine_info``: SAM 3's ``segmenter_engine``, and with onnxruntime the
    ``segmenter_providers`` really used and the parts on each engine)."""
    engine = getattr(segmenter, "engine_info", None)
    extra = {str(k): str(v) for k, v in engine.items()} if isinstance(engine, Mapping) else {}
    return {**config.backends, **extra}


def load_plugin(spec: str) -> Segmenter:
    """``"package.module:factory"`` -> ``factory()`` (interface §3)."""
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

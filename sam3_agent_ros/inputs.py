"""What the commands share about their inputs: the parameter flags and the Config they make, the
check of the chosen backends before anything loads, image files read with a pixel cap, and output
folders checked before any work (``prepare_out_dir``).

``sam3-agent run`` (``run_command.py``) and ``sam3-agent eval`` (``eval/``) both use it; it
imports nothing from either (nor from ``cli.py``).
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
from pathlib import Path

log = logging.getLogger("sam3_agent_ros.cli")


def add_config_arguments(parser: argparse.ArgumentParser) -> None:
    """``--params-file``, ``-p NAME:=VALUE`` (repeatable) and ``--offline``: read back by
    ``load_config(args.params_file, args.overrides, args.offline)``."""
    parser.add_argument("--params-file",
                        help="ROS 2 parameters YAML (sam3_agent: ros__parameters:)")
    parser.add_argument("-p", dest="overrides", action="append", default=[],
                        metavar="NAME:=VALUE",
                        help="set one parameter (repeatable), e.g. -p llm.model:=gpt-4o")
    add_offline_flag(parser)


def add_offline_flag(parser: argparse.ArgumentParser) -> None:
    from sam3_agent_ros.config import offline_overrides

    parser.add_argument("--offline", action="store_true",
                        help="use the built-in demo backends, no model (= "
                             + " ".join(f"-p {o}" for o in offline_overrides()) + ")")


def load_config(params_file: str | None, overrides: list[str], offline: bool = False):
    """Params file, then ``-p`` overrides, then ``--offline`` (``OFFLINE_BACKENDS``), validated
    into a Config (ConfigError on any problem, e.g. ``--offline`` against a ``-p`` backend, or
    credentials in ``llm.base_url``: ``backends.base_url_credentials_problem``)."""
    from sam3_agent_ros.backends import base_url_credentials_problem
    from sam3_agent_ros.config import (
        OFFLINE_BACKENDS,
        Config,
        ConfigError,
        load_params_file,
        parse_override,
    )

    params = load_params_file(params_file) if params_file else {}
    for text in overrides:
        name, value = parse_override(text)
        if offline and name in OFFLINE_BACKENDS and value != OFFLINE_BACKENDS[name]:
            raise ConfigError(f"--offline sets {name}:={OFFLINE_BACKENDS[name]} but -p "
                              f"{name}:={value} asks otherwise: drop one of them")
        params[name] = value
    if offline:
        params.update(OFFLINE_BACKENDS)
    config = Config.from_params(params)
    secret = base_url_credentials_problem(config.llm.base_url, config.llm.api_key_env)
    if secret:
        raise ConfigError(secret)
    return config


def check_backends(config, command: str) -> bool:
    """Before anything loads: print what the chosen backends lack (one line each, with how to
    try without a model) and return False; else warn when demo backends answer; True."""
    from sam3_agent_ros.backends import missing_requirements
    from sam3_agent_ros.config import demo_backends_warning

    missing = missing_requirements(config)
    for problem in missing:
        print(f"sam3-agent {command}: {problem}; to try without a model: add --offline",
              file=sys.stderr)
    if missing:
        return False
    warning = demo_backends_warning(config.to_params())
    if warning:
        log.warning(warning)
    return True


def read_rgb(path: str | Path, max_pixels: int | None = None):
    """A PNG or JPEG file as RGB uint8 (H, W, 3); ``ValueError`` saying what is wrong with it.
    Its size is read from its header first: more than ``max_pixels`` (default: the
    ``max_image_pixels`` default) is refused before decoding (``image_header.py``)."""
    import cv2
    import numpy as np

    from sam3_agent_ros.image_header import (
        DEFAULT_MAX_PIXELS,
        ImageHeaderError,
        ImageTooLarge,
        decode_bounded,
    )

    if Path(path).is_dir():
        raise ValueError("is a directory, not an image file (give a PNG or JPEG file)")
    if not Path(path).is_file():
        raise ValueError("no such file")
    try:
        image = decode_bounded(np.fromfile(path, dtype=np.uint8),
                               DEFAULT_MAX_PIXELS if max_pixels is None else max_pixels)
    except ImageTooLarge as exc:
        raise ValueError(f"too large: {exc} (not decoded)") from None
    except ImageHeaderError as exc:
        raise ValueError(f"not a readable image: {exc}") from None
    except ValueError as exc:
        raise ValueError(f"not a readable image (PNG, JPEG): {exc}") from None
    return cv2.cvtColor(image, cv2.COLOR_BGR2RGB)


def prepare_out_dir(path: str | Path, flag: str = "--out") -> Path:
    """Create the output folder ``path`` (and its parents) and check that a file can be written
    in it, before any work is done: ``ValueError`` naming the flag, the path and the OS error
    otherwise. Returns ``Path(path)``."""
    out = Path(path)
    if out.exists() and not out.is_dir():
        raise ValueError(f"{flag} {path}: not a directory (a file of that name exists); "
                         "choose another path")
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=out):  # writable? (permissions, read-only disk)
            pass
    except OSError as exc:
        raise ValueError(f"{flag} {path}: cannot create or write there: "
                         f"{exc.strerror or exc}") from None
    return out


def write_png(path: str | Path, image) -> None:
    """``cv2.imwrite`` that says when it failed (``OSError``): cv2 only returns False."""
    import cv2

    try:
        written = cv2.imwrite(str(path), image)
    except cv2.error as exc:
        raise OSError(f"cannot write {path}: {exc}") from None
    if not written:
        raise OSError(f"cannot write {path}")

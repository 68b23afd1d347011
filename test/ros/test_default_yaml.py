"""config/sam3_agent.yaml: in sync with config.PARAMETERS, and read by rcl as the defaults."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import rclpy

from sam3_agent_ros.config import PARAMETERS, Config, load_params_file
from sam3_agent_ros.ros import params

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_YAML = REPO_ROOT / "config" / "sam3_agent.yaml"


def load_generator():
    spec = importlib.util.spec_from_file_location(
        "make_default_yaml", REPO_ROOT / "scripts" / "make_default_yaml.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_default_yaml_is_in_sync_with_the_parameter_table():
    assert DEFAULT_YAML.read_text() == load_generator().render(), \
        "config/sam3_agent.yaml is out of date: run scripts/make_default_yaml.py"


def test_every_parameter_has_a_comment_and_its_default():
    commented, section, previous = {}, "", ""
    for line in DEFAULT_YAML.read_text().splitlines():
        stripped = line.strip()
        if stripped.endswith(":") and line.startswith("    ") and not line.startswith("      "):
            section = stripped[:-1]  # "llm:", "segmenter:" ...
        elif ":" in stripped and not stripped.startswith("#") and line.startswith("    "):
            key = stripped.partition(":")[0]
            name = f"{section}.{key}" if line.startswith("      ") else key
            commented[name] = previous.startswith("#")
        previous = stripped
    assert commented == {p.name: True for p in PARAMETERS}
    assert Config.from_params(load_params_file(DEFAULT_YAML)) == Config()


def test_the_shipped_yaml_chooses_the_real_backends():
    """A copied config/sam3_agent.yaml must never run the demo backends unasked."""
    params = load_params_file(DEFAULT_YAML)
    assert (params["llm.backend"], params["segmenter.backend"]) == ("openai", "sam3")
    assert "offline:=true" in DEFAULT_YAML.read_text()  # the header says how to try without


def test_rcl_reads_the_file_for_a_node_in_any_namespace():
    context = rclpy.Context()
    rclpy.init(context=context, args=["--ros-args", "--params-file", str(DEFAULT_YAML),
                                      "-r", "__ns:=/some/robot"])
    try:
        node = rclpy.create_node("sam3_agent", context=context)
        assert params.declare_parameters(node) == []
        assert set(node._parameter_overrides) >= {p.name for p in PARAMETERS}
        assert params.read_config(node) == Config()
        node.destroy_node()
    finally:
        rclpy.shutdown(context=context)

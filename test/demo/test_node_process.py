"""The node subprocess of the demos: its command line."""

from __future__ import annotations

from pathlib import Path

from sam3_agent_demo import sample
from sam3_agent_demo.node_process import node_arguments


def test_node_arguments_order_files_then_overrides_then_remaps():
    args = node_arguments([Path("a.yaml"), Path("b.yaml")], ["llm.model:=m"])
    assert args[:5] == ["--ros-args", "--params-file", "a.yaml", "--params-file", "b.yaml"]
    assert args[5:7] == ["-p", "llm.model:=m"]
    assert "image:=" + sample.COLOR_TOPIC in args and "query:=" + sample.QUERY_TOPIC in args
    custom = node_arguments([], [], remaps={"image": "/cam"})
    assert custom == ["--ros-args", "-r", "image:=/cam"]

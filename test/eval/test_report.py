"""summary.json without secrets, and the order of the worst samples (refused ones never)."""

from __future__ import annotations

from sam3_agent_ros.config import PARAMETERS, Config
from sam3_agent_ros.eval.report import public_config, worst_rows


def test_public_config_keeps_every_parameter_and_redacts_urls():
    """Issue 17 item 8: the old name filter dropped llm.max_tokens and kept URL query keys."""
    params = Config.from_params({"llm.base_url": "https://user:pw@gpu-box:8000/v1?api-key=K1",
                                 "llm.max_tokens": 4096}).to_params()
    shown = public_config(params)
    assert set(shown) == {p.name for p in PARAMETERS}
    assert shown["llm.max_tokens"] == 4096 and shown["llm.api_key_env"] == "OPENAI_API_KEY"
    assert shown["llm.base_url"] == "https://***@gpu-box:8000/v1?api-key=***"


def test_public_config_leaves_out_a_field_that_would_hold_a_secret():
    params = {"llm.api_key": "sk-123", "plugin.auth_token": "t", "x.client_secret": "s",
              "llm.max_tokens": 1, "llm.api_key_env": "E"}
    assert public_config(params) == {"llm.max_tokens": 1, "llm.api_key_env": "E"}


def test_worst_rows_put_the_lowest_iou_and_biggest_miss_first():
    rows = [{"id": "a", "iou": 0.5, "union": 10}, {"id": "b", "iou": 0.0, "union": 5},
            {"id": "c", "iou": 0.0, "union": 50}, {"id": "d", "iou": 0.0, "union": None},
            {"id": "e", "iou": None}, {"id": "f", "iou": 0.0, "union": None, "refused": True}]
    assert [r["id"] for r in worst_rows(rows, 3)] == ["c", "b", "d"]  # a refused one: never

"""summary.json without secrets, and the order of the worst samples."""

from __future__ import annotations

from sam3_agent_ros.eval.report import public_config, worst_rows


def test_public_config_drops_secrets_and_url_credentials():
    params = {"llm.api_key_env": "OPENAI_API_KEY", "llm.api_key": "sk-123",
              "plugin.auth_token": "t", "llm.base_url": "https://user:pw@gpu-box:8000/v1",
              "llm.model": "m"}
    assert public_config(params) == {"llm.api_key_env": "OPENAI_API_KEY",
                                     "llm.base_url": "https://gpu-box:8000/v1", "llm.model": "m"}


def test_worst_rows_put_the_lowest_iou_and_biggest_miss_first():
    rows = [{"id": "a", "iou": 0.5, "union": 10}, {"id": "b", "iou": 0.0, "union": 5},
            {"id": "c", "iou": 0.0, "union": 50}, {"id": "d", "iou": 0.0, "union": None},
            {"id": "e", "iou": None}]
    assert [r["id"] for r in worst_rows(rows, 3)] == ["c", "b", "d"]

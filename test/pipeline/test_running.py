"""pipeline/running.py: a query id is held by one goal until its result; a second is refused."""

from __future__ import annotations

from sam3_agent_ros.core.types import Query, QueryStatus
from sam3_agent_ros.pipeline.running import RunningIds, in_use


def test_an_id_is_held_by_its_first_claim_until_released():
    running: RunningIds[str] = RunningIds()
    assert running.claim("q-1", "first goal")
    assert not running.claim("q-1", "second goal")  # refused, the first keeps it
    assert running.holds("q-1") and running.get("q-1") == "first goal"
    assert running.ids_of(lambda held: held == "first goal") == ["q-1"]
    assert running.release("q-1") == "first goal"
    assert not running.holds("q-1") and running.release("q-1") is None
    assert running.claim("q-1", "second goal")  # free again once its result came


def test_a_query_with_a_held_id_gets_one_failed_result_naming_the_id():
    result = in_use(Query("q-1", "the cup", refines="q-0"), {"llm": "offline"})
    assert result.status == QueryStatus.FAILED and result.query_id == "q-1"
    assert result.error == "query_id 'q-1' is already in use by a running goal"
    assert result.refines == "q-0" and result.backends == {"llm": "offline"}

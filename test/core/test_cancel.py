"""CancelToken: children, deadlines, and the callbacks that cut a call in flight at once."""

from sam3_agent_ros.core.cancel import CancelToken


def test_a_callback_runs_once_on_cancel_and_a_child_finds_its_parent():
    calls = []
    parent = CancelToken()
    child = parent.child()
    assert child.parent is parent and parent.parent is None
    child.on_cancel(lambda: calls.append("child"))
    parent.on_cancel(lambda: calls.append("parent"))
    parent.cancel("preempted")
    parent.cancel("again")
    assert calls == ["parent", "child"] and child.reason == "preempted"


def test_a_forgotten_callback_is_not_called_and_a_late_one_runs_at_once():
    calls = []
    token = CancelToken()
    forget = token.on_cancel(lambda: calls.append("forgotten"))
    forget()
    token.cancel()
    token.on_cancel(lambda: calls.append("late"))
    assert calls == ["late"]

"""What the console asks of the node for its pages, on the console's ROS thread: goals on
``~/segment`` (each page's own, cancelled when the page closes, at most ``MAX_GOALS_PER_PAGE``
running), ``~/stop_follow``, and ``concepts.prompts`` through the parameter service (that name
only: no other parameter is ever set). Each outcome is a notice on the page.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from sam3_agent_ros.console import views
from sam3_agent_ros.console.commands import Command
from sam3_agent_ros.console.hub import Hub
from sam3_agent_ros.core.untrusted_text import for_log
from sam3_agent_ros.ros.output_topics import resolve

MAX_GOALS_PER_PAGE = 4


class NodeRequests:
    def __init__(self, node: Any, node_name: str, hub: Hub,
                 show_status: Callable[[dict], None],
                 show_concepts: Callable[[list[str]], None]) -> None:
        from rcl_interfaces.srv import SetParameters
        from rclpy.action import ActionClient
        from std_srvs.srv import Trigger

        from sam3_agent_ros.action import Segment

        self.node_name = node_name
        self.hub = hub
        self._show_status = show_status
        self._show_concepts = show_concepts
        self._segment = Segment
        self._action: Any = ActionClient(node, Segment, resolve("~/segment", node_name))
        self._stop_follow = node.create_client(Trigger, resolve("~/stop_follow", node_name))
        self._set_params = node.create_client(SetParameters, f"{node_name}/set_parameters")
        self._goals: dict[str, list[dict]] = {}  # page -> its goals ({"handle": None} while sent)
        self._closed_pages: set[str] = set()

    def handle(self, page: str, command: Command | None) -> None:
        if command is None or command.kind == "cancel":
            if command is None:
                self._closed_pages.add(page)
            self._cancel_page(page)
            return
        if command.kind in ("ask", "correct"):
            self._send_goal(page, command)
        elif command.kind == "stop_follow":
            self._call_stop_follow()
        elif command.kind == "concepts":
            self._set_concepts(command.concepts)

    def _send_goal(self, page: str, command: Command) -> None:
        if not self._action.server_is_ready():
            self.notice(f"not sent: the node {self.node_name} is not there (or not active)")
            return
        goals = self._goals.setdefault(page, [])
        if len(goals) >= MAX_GOALS_PER_PAGE:
            self.notice(f"not sent: {len(goals)} queries of this page are still running")
            return
        query_id = f"console-{uuid.uuid4().hex[:10]}"
        goal = self._segment.Goal(query=command.query, query_id=query_id,
                                  follow=command.follow, refines=command.refines)
        slot: dict[str, Any] = {"handle": None}
        goals.append(slot)
        sent = self._action.send_goal_async(
            goal, feedback_callback=lambda m: self._show_status(
                views.feedback_view(m.feedback, query_id)))
        sent.add_done_callback(lambda f: self._accepted(page, slot, f))
        self.notice(f"sent {query_id}" + (f" (correcting {command.refines})"
                                           if command.refines else ""))

    def _accepted(self, page: str, slot: dict, future: Any) -> None:
        handle = future.result()
        goals = self._goals.get(page, [])
        if handle is None or not handle.accepted:
            if slot in goals:
                goals.remove(slot)
            self.notice("the node refused the goal (not active, or its queue is full)")
            return
        slot["handle"] = handle
        if page in self._closed_pages:  # the tab closed while the goal was on its way
            handle.cancel_goal_async()
        handle.get_result_async().add_done_callback(lambda _: self._finished(page, slot))

    def _finished(self, page: str, slot: dict) -> None:
        goals = self._goals.get(page)
        if goals is not None and slot in goals:
            goals.remove(slot)
        if not goals:
            self._goals.pop(page, None)
            self._closed_pages.discard(page)

    def _cancel_page(self, page: str) -> None:
        for slot in self._goals.get(page, []):
            if slot["handle"] is not None:
                slot["handle"].cancel_goal_async()
        if not self._goals.get(page):
            self._closed_pages.discard(page)

    def cancel_all(self) -> None:
        for page in list(self._goals):
            self._cancel_page(page)

    def _call_stop_follow(self) -> None:
        from std_srvs.srv import Trigger

        if not self._stop_follow.service_is_ready():
            self.notice("not sent: the node's ~/stop_follow is not there")
            return

        def done(future: Any) -> None:
            reply = future.result()
            self.notice("stop following: " + (for_log(reply.message) if reply else "no reply"))
        self._stop_follow.call_async(Trigger.Request()).add_done_callback(done)

    def _set_concepts(self, concepts: tuple[str, ...]) -> None:
        from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue
        from rcl_interfaces.srv import SetParameters

        if not self._set_params.service_is_ready():
            self.notice("not sent: the node's parameter service is not there")
            return
        value = ParameterValue(type=ParameterType.PARAMETER_STRING_ARRAY,
                               string_array_value=list(concepts))
        request = SetParameters.Request(parameters=[Parameter(name="concepts.prompts",
                                                              value=value)])

        def done(future: Any) -> None:
            reply = future.result()
            if reply is not None and reply.results and reply.results[0].successful:
                self._show_concepts(list(concepts))
                self.notice("concepts set: " + (", ".join(concepts) or "(none: off)"))
            else:
                reason = reply.results[0].reason if reply and reply.results else "no reply"
                self.notice(f"concepts refused by the node: {for_log(reason)}")
        self._set_params.call_async(request).add_done_callback(done)

    def notice(self, text: str) -> None:
        self.hub.set("notice", {"text": text[:views.MAX_TEXT_CHARS], "at": time.time()})

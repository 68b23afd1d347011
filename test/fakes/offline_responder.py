"""A ``ScriptedServer`` responder that answers like ``llm.backend: offline``, over real HTTP.

``offline_responder(delay_s)`` reads the text of each Chat Completions request (images are not
needed by the planner), asks ``OfflinePlanner`` for the reply and sends it after ``delay_s``:
a whole evaluation then runs through the real OpenAI client and HTTP with a chosen endpoint
latency, and must score exactly as the in-process offline backend does.
"""

from __future__ import annotations

from collections.abc import Callable

from sam3_agent_ros.core.cancel import CancelToken
from sam3_agent_ros.core.types import Message
from sam3_agent_ros.llm.offline import OfflinePlanner
from test.fakes.scripted_server import Reply, message_text


def offline_responder(delay_s: float = 0.0) -> Callable[[dict], Reply]:
    planner = OfflinePlanner()

    def respond(body: dict) -> Reply:
        messages = [Message.text(m["role"], message_text(m)) for m in body["messages"]]
        reply = planner.complete(messages, CancelToken())
        return Reply(text=reply.text, prompt_tokens=100, completion_tokens=20, delay_s=delay_s)
    return respond

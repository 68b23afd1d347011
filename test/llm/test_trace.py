import json
import threading

import numpy as np
import pytest

from sam3_agent_ros.core.cancel import CancelToken
from sam3_agent_ros.core.errors import LlmError
from sam3_agent_ros.core.types import ImagePart, LlmReply, Message
from sam3_agent_ros.llm.trace import TracingClient, conversation_of, trace_messages
from test.fakes.secret_url import ATTACK_URL_TEXT, leaks


class ScriptedClient:
    """Answers from a list; an Exception in the list is raised instead (fails when exhausted)."""

    def __init__(self, replies):
        self.replies = list(replies)
        self.lock = threading.Lock()
        self.closed = False

    def complete(self, messages, cancel):
        with self.lock:
            if not self.replies:
                raise AssertionError("ScriptedClient: no more replies")
            reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return reply

    def close(self):
        self.closed = True


def read_lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


FRAME = ImagePart(np.zeros((480, 640, 3), np.uint8), "frame")
MAIN = [Message.text("system", "You plan tool calls."), Message("user", (FRAME, "the cup"))]
VERIFIER = [Message.text("system", "Answer with <verdict>Accept</verdict> or Reject."),
            Message("user", (FRAME, ImagePart(np.zeros((64, 32, 3), np.uint8), "crop-2")))]


def test_request_and_response_lines_with_image_placeholders(tmp_path):
    path = tmp_path / "trace.jsonl"
    inner = ScriptedClient([LlmReply("<tool>x</tool>", 100, 9)])
    client = TracingClient(inner, path)
    reply = client.complete(MAIN, CancelToken())
    client.close()
    assert reply == LlmReply("<tool>x</tool>", 100, 9)
    assert inner.closed
    request, response = read_lines(path)
    assert request["kind"] == "request" and response["kind"] == "response"
    assert request["call"] == response["call"] == 1
    assert request["conversation"] == "main"
    assert request["n_messages"] == 2 and request["n_images"] == 1
    assert request["messages"][1] == {"role": "user",
                                      "content": [{"image": "frame 640x480"}, "the cup"]}
    assert response["text"] == "<tool>x</tool>"
    assert (response["prompt_tokens"], response["completion_tokens"]) == (100, 9)
    assert response["duration_s"] >= 0 and isinstance(request["t"], float)


def test_errors_are_traced_and_re_raised(tmp_path):
    path = tmp_path / "trace.jsonl"
    client = TracingClient(ScriptedClient([LlmError("HTTP 500: boom")]), path)
    with pytest.raises(LlmError, match="boom"):
        client.complete(VERIFIER, CancelToken())
    client.close()
    request, error = read_lines(path)
    assert request["conversation"] == "verifier" and request["n_images"] == 2
    assert request["messages"][1]["content"][1] == {"image": "crop-2 32x64"}
    assert error == {**error, "kind": "error", "call": 1, "error_type": "LlmError",
                     "error": "HTTP 500: boom"}


def test_urls_are_written_redacted_whatever_the_line_quotes(tmp_path):
    """Issue 17 item 8: an error (or a message) quoting llm.base_url with credentials."""
    path = tmp_path / "trace.jsonl"
    client = TracingClient(ScriptedClient([LlmReply(f"see {ATTACK_URL_TEXT}"),
                                           LlmError(f"cannot reach {ATTACK_URL_TEXT}")]), path)
    query = [MAIN[0], Message("user", (FRAME, f"the cup, as on {ATTACK_URL_TEXT}"))]
    client.complete(query, CancelToken())
    with pytest.raises(LlmError):
        client.complete(query, CancelToken())
    client.close()
    text = path.read_text()
    assert leaks(text) == []
    lines = read_lines(path)  # still JSON
    assert lines[1]["text"] == "see http://***@llm.example:8000/v1?api-key=***"
    assert lines[3]["error"] == "cannot reach http://***@llm.example:8000/v1?api-key=***"


def test_concurrent_calls_write_whole_lines_paired_by_call_number(tmp_path):
    path = tmp_path / "trace.jsonl"
    client = TracingClient(ScriptedClient([LlmReply(f"r{i}") for i in range(40)]), path)
    threads = [threading.Thread(target=lambda: [client.complete(VERIFIER, CancelToken())
                                                 for _ in range(10)]) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    client.close()
    lines = read_lines(path)
    assert len(lines) == 80
    by_call = {}
    for line in lines:
        by_call.setdefault(line["call"], []).append(line["kind"])
    assert sorted(by_call) == list(range(1, 41))
    assert all(kinds == ["request", "response"] for kinds in by_call.values())


def test_appends_to_an_existing_trace_and_ignores_writes_after_close(tmp_path):
    path = tmp_path / "trace.jsonl"
    path.write_text('{"earlier": true}\n')
    client = TracingClient(ScriptedClient([LlmReply("a"), LlmReply("b")]), path)
    client.complete(MAIN, CancelToken())
    client.close()
    assert client.complete(MAIN, CancelToken()).text == "b"  # still forwards
    assert len(read_lines(path)) == 3


def test_helpers():
    assert conversation_of(MAIN) == "main"
    assert conversation_of(VERIFIER) == "verifier"
    assert conversation_of([]) == "main"
    assert trace_messages([Message.text("assistant", "hi")]) == [
        {"role": "assistant", "content": ["hi"]}]

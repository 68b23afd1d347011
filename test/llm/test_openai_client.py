"""The real openai client against the scripted server over real HTTP on 127.0.0.1."""

import json
import logging
import socket
import threading
import time

import numpy as np
import pytest

from sam3_agent_ros.config import LlmConfig
from sam3_agent_ros.core.cancel import CancelToken
from sam3_agent_ros.core.errors import LlmError
from sam3_agent_ros.core.types import ImagePart, Message, NativeToolCall
from sam3_agent_ros.llm.openai_client import OpenAiClient
from sam3_agent_ros.llm.trace import TracingClient
from sam3_agent_ros.redact import install_log_redaction
from test.fakes.scripted_server import (
    Reply,
    ScriptedServer,
    decode_image,
    drop_connection,
    http_error,
    image_urls,
    raw_body,
    slow,
    text_reply,
)
from test.fakes.secret_url import attack_url, closed_port, leaks, redacted_url

KEY_ENV = "SAM3_AGENT_TEST_API_KEY"
SECRET = "sk-test-SECRET-9f8e7d6c5b4a"


@pytest.fixture(autouse=True)
def api_key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, SECRET)


def make_client(base_url, max_image_side=256, **overrides):
    options = {"timeout_s": 2.0, "max_retries": 2, "model": "test-model", "temperature": 0.0,
               "max_tokens": 256}
    options.update(overrides)
    return OpenAiClient(LlmConfig(base_url=base_url, api_key_env=KEY_ENV, **options),
                        max_image_side=max_image_side, backoff_base_s=0.01)


def text_only(text="find the red cup"):
    return [Message.text("system", "you are a planner"), Message.text("user", text)]


def closed_port_url():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def test_happy_path_sends_the_request_and_returns_text_and_usage():
    with ScriptedServer([text_reply("<tool>{}</tool>", 120, 7),
                         Reply(text="second", usage=False)]) as server:
        client = make_client(server.base_url)
        reply = client.complete(text_only(), CancelToken())
        assert (reply.text, reply.prompt_tokens, reply.completion_tokens) == (
            "<tool>{}</tool>", 120, 7)
        missing_usage = client.complete(text_only(), CancelToken())
        assert (missing_usage.text, missing_usage.prompt_tokens,
                missing_usage.completion_tokens) == ("second", 0, 0)
        client.close()
    server.assert_clean()
    body = server.requests[0].body
    assert body["model"] == "test-model"
    assert body["temperature"] == 0.0 and body["max_tokens"] == 256
    assert body["messages"] == [{"role": "system", "content": "you are a planner"},
                                {"role": "user", "content": "find the red cup"}]
    assert server.requests[0].headers["authorization"] == f"Bearer {SECRET}"


def test_images_are_downscaled_and_encoded_once_per_query():
    frame = ImagePart(np.full((600, 1200, 3), 90, np.uint8), "frame")
    overlay = ImagePart(np.full((600, 1200, 3), 180, np.uint8), "overlay-1")
    first = [Message.text("system", "s"), Message("user", (frame, "the cup"))]
    second = first + [Message.text("assistant", "a"), Message("user", ("result", overlay))]
    with ScriptedServer(["one", "two", "three"]) as server:
        client = make_client(server.base_url, max_image_side=300)
        query = CancelToken()
        client.complete(first, query)
        client.complete(second, query)
        assert client.encoder_for(query).encode_count == 2  # frame once, overlay once
        next_query = CancelToken()
        client.complete(first, next_query)
        assert client.encoder_for(next_query).encode_count == 1  # a new query encodes anew
    server.assert_clean()
    urls = image_urls(server.requests[1].body)
    assert len(urls) == 2
    assert urls[0] == image_urls(server.requests[0].body)[0]
    for url, value in zip(urls, (90, 180)):
        decoded = decode_image(url)
        assert decoded.shape == (150, 300, 3)
        assert abs(int(decoded.mean()) - value) <= 3


@pytest.mark.parametrize("failure", [http_error(500), http_error(503), http_error(429),
                                     http_error(429, retry_after=0), drop_connection()])
def test_retriable_failures_are_retried_then_succeed(failure):
    with ScriptedServer([failure, failure, "finally"]) as server:
        reply = make_client(server.base_url, max_retries=2).complete(text_only(), CancelToken())
    assert reply.text == "finally"
    server.assert_clean()
    assert len(server.requests) == 3


def test_retries_are_bounded_by_max_retries():
    with ScriptedServer([http_error(500, "boom")] * 3) as server:
        client = make_client(server.base_url, max_retries=2)
        with pytest.raises(LlmError, match=r"^HTTP 500: boom \(3 attempts\)$"):
            client.complete(text_only(), CancelToken())
    server.assert_clean()


def test_zero_retries_means_one_attempt():
    with ScriptedServer([http_error(502)]) as server, \
            pytest.raises(LlmError, match=r"^HTTP 502: .*\(1 attempt\)$"):
        make_client(server.base_url, max_retries=0).complete(text_only(), CancelToken())
    assert len(server.requests) == 1


def test_an_unreachable_endpoint_is_one_line_naming_the_endpoint_and_the_fix():
    url = closed_port_url()
    client = make_client(url, max_retries=1)
    with pytest.raises(LlmError) as caught:
        client.complete(text_only(), CancelToken())
    message = str(caught.value)
    assert message.startswith(f"cannot reach the LLM endpoint {url} after 2 attempts (")
    assert "\n" not in message
    assert "start the server or check llm.base_url" in message
    assert "try without a model: -p llm.backend:=offline -p segmenter.backend:=color" in message
    assert "LLM request failed" not in message  # the agent says that, once
    failure = caught.value.failure  # the same, as fields (what the node's health reads)
    assert (failure.kind, failure.endpoint, failure.attempts) == (LlmError.UNREACHABLE, url, 2)
    assert failure.cause and failure.cause in message and failure.status_code is None


def test_credentials_of_the_endpoint_url_are_in_no_error_and_no_log(caplog):
    """Issue 17 item 8: llm.base_url=http://user:pass@host/v1?api-key=K."""
    install_log_redaction()  # what the node and the CLI do at start-up
    caplog.set_level(logging.DEBUG)
    host_port = closed_port()
    client = make_client(attack_url(host_port), max_retries=1)
    assert leaks(repr(client)) == []
    with pytest.raises(LlmError) as caught:
        client.complete(text_only(), CancelToken())
    assert str(caught.value).startswith(f"cannot reach the LLM endpoint {redacted_url(host_port)}")
    assert leaks(str(caught.value)) == []
    assert caught.value.endpoint == redacted_url(host_port) and leaks(repr(caught.value.failure)) \
        == []
    assert "retry 1/1" in caplog.text and leaks(caplog.text) == []


def test_credentials_are_not_shown_when_the_server_answers_an_error():
    with ScriptedServer([http_error(404, "no such model")] * 2) as server:
        host_port = server.base_url.split("//")[1].split("/")[0]
        client = make_client(attack_url(host_port))
        with pytest.raises(LlmError, match="check llm.model") as caught:
            client.complete(text_only(), CancelToken())
    assert leaks(str(caught.value)) == [] and redacted_url(host_port) in str(caught.value)
    failure = caught.value.failure
    assert (failure.kind, failure.status_code, failure.endpoint) == (
        LlmError.HTTP_STATUS, 404, redacted_url(host_port))


@pytest.mark.parametrize("status, message, hint", [
    (400, "bad request", "bad request"),
    (400, "At most 2 image(s) may be provided in one request.", "--limit-mm-per-prompt"),
    (401, f"Incorrect API key provided: {SECRET}", f"set the API key in \\${KEY_ENV}"),
    (403, "forbidden", f"set the API key in \\${KEY_ENV}"),
    (404, "The model `test-model` does not exist.", "check llm.model='test-model'"),
    (422, "unprocessable", "unprocessable"),
])
def test_client_errors_fail_at_once_with_a_hint(status, message, hint):
    with ScriptedServer([http_error(status, message)]) as server, \
            pytest.raises(LlmError, match=hint) as caught:
        make_client(server.base_url).complete(text_only(), CancelToken())
    assert len(server.requests) == 1  # not retried
    assert f"HTTP {status}" in str(caught.value)
    assert SECRET not in str(caught.value)


@pytest.mark.parametrize("body, reason", [
    ("this is not json", "not JSON"),
    ("", "not JSON"),
    ({}, "no choices"),
    ({"choices": []}, "no choices"),
    ({"choices": None}, "no choices"),
    ({"choices": [{"message": {"content": 42}}]}, "not a string or a list of parts"),
    ({"choices": [{"message": None}]}, "no message"),
    ({"choices": "abc"}, "malformed"),
    ([1, 2, 3], "malformed"),
    ({"choices": [{"message": {"content": "ok"}}], "usage": {"prompt_tokens": "many"}}, None),
])
def test_malformed_responses_become_llm_errors(body, reason):
    """A response the server got wrong is a system error (an empty or refused reply is not:
    see test_model_reply_shapes_are_returned_as_they_came)."""
    with ScriptedServer([raw_body(body)]) as server:
        client = make_client(server.base_url)
        if reason is None:  # nonsense usage is ignored, the reply is fine
            assert client.complete(text_only(), CancelToken()).prompt_tokens == 0
            return
        with pytest.raises(LlmError, match=reason) as caught:
            client.complete(text_only(), CancelToken())
    assert "malformed LLM response" in str(caught.value)
    assert len(server.requests) == 1


def test_timeout_is_an_llm_error_after_retries():
    with ScriptedServer([slow("late", 3.0), slow("late", 3.0)]) as server:
        client = make_client(server.base_url, timeout_s=0.3, max_retries=1)
        with pytest.raises(LlmError, match=r"^the LLM endpoint http://127.0.0.1:\d+/v1 did not "
                                            r"answer within 0.3 s \(llm.timeout_s\) after 2 "
                                            r"attempts: .* raise llm.timeout_s$") as caught:
            client.complete(text_only(), CancelToken())
        endpoint = server.base_url
    assert len(server.requests) == 2
    failure = caught.value.failure
    assert (failure.kind, failure.endpoint, failure.attempts, failure.waited_s) == (
        LlmError.TIMEOUT, endpoint, 2, 0.3)


def test_query_deadline_bounds_the_request():
    with ScriptedServer([slow("late", 5.0)]) as server:
        client = make_client(server.base_url, timeout_s=30.0, max_retries=3)
        started = time.monotonic()
        with pytest.raises(LlmError, match="deadline|no time left"):
            client.complete(text_only(), CancelToken(deadline=time.monotonic() + 0.3))
        assert time.monotonic() - started < 3.0  # functional bound: far below the 5 s reply


def test_expired_deadline_sends_nothing():
    with ScriptedServer([]) as server:
        client = make_client(server.base_url)
        with pytest.raises(LlmError, match="deadline"):
            client.complete(text_only(), CancelToken(deadline=time.monotonic() - 1))
    assert server.requests == []


def test_cancel_aborts_an_in_flight_call():
    with ScriptedServer([slow("late", 5.0)]) as server:
        client = make_client(server.base_url, timeout_s=30.0)
        cancel = CancelToken()
        threading.Timer(0.2, cancel.cancel).start()
        started = time.monotonic()
        with pytest.raises(LlmError, match="^cancelled$"):
            client.complete(text_only(), cancel)
        assert time.monotonic() - started < 3.0  # functional bound: far below the 5 s reply


def test_cancel_stops_the_backoff_and_later_calls():
    with ScriptedServer([http_error(500)]) as server:
        config = LlmConfig(base_url=server.base_url, api_key_env=KEY_ENV, max_retries=5,
                           retry_jitter=0.0)  # the 10 s backoff exactly (full jitter may be ~0)
        client = OpenAiClient(config, 256, backoff_base_s=10.0, backoff_max_s=10.0)
        cancel = CancelToken()
        threading.Timer(0.2, cancel.cancel).start()
        started = time.monotonic()
        with pytest.raises(LlmError, match="^cancelled$"):
            client.complete(text_only(), cancel)
        assert time.monotonic() - started < 5.0
        with pytest.raises(LlmError, match="^cancelled$"):
            client.complete(text_only(), cancel)
    assert len(server.requests) == 1


def test_concurrent_calls_share_one_client():
    def responder(body):
        return slow(body["messages"][-1]["content"], 0.2)

    with ScriptedServer(responder=responder) as server:
        client = make_client(server.base_url)
        replies = {}

        def ask(index):
            replies[index] = client.complete(text_only(f"q{index}"), CancelToken()).text

        threads = [threading.Thread(target=ask, args=(i,)) for i in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert replies == {i: f"q{i}" for i in range(6)}
    server.assert_clean()


def test_bad_image_input_is_an_llm_error_not_a_crash():
    messages = [Message("user", (ImagePart(np.zeros((4, 4), np.float64), "frame"), "q"))]
    with ScriptedServer([]) as server, \
            pytest.raises(LlmError, match="cannot build the LLM request"):
        make_client(server.base_url).complete(messages, CancelToken())
    assert server.requests == []


def test_closed_client_fails_cleanly():
    with ScriptedServer([]) as server:
        client = make_client(server.base_url)
        client.close()
        client.close()
        with pytest.raises(LlmError, match="closed"):
            client.complete(text_only(), CancelToken())


def test_missing_key_sends_a_placeholder_and_says_so(monkeypatch, caplog):
    monkeypatch.delenv(KEY_ENV)
    caplog.set_level(logging.INFO, logger="sam3_agent_ros")
    with ScriptedServer(["ok"]) as server:
        make_client(server.base_url).complete(text_only(), CancelToken())
    assert server.requests[0].headers["authorization"] == "Bearer EMPTY"
    assert f"no API key in ${KEY_ENV}" in caplog.text


def test_api_key_never_leaks_into_logs_errors_repr_or_trace(tmp_path, caplog):
    caplog.set_level(logging.DEBUG)  # every logger, the openai SDK and httpx included
    trace_path = tmp_path / "trace.jsonl"
    errors = []
    script = ["fine", http_error(500, f"upstream said {SECRET}"), http_error(500), "recovered",
              http_error(401, f"Incorrect API key provided: {SECRET}"),
              http_error(400, f"bad key {SECRET}")]
    with ScriptedServer(script) as server:
        client = make_client(server.base_url, max_retries=2)
        traced = TracingClient(client, trace_path)
        frame = ImagePart(np.zeros((40, 40, 3), np.uint8), "frame")
        messages = [Message.text("system", "s"), Message("user", (frame, "q"))]
        for _ in range(4):
            try:
                traced.complete(messages, CancelToken())
            except LlmError as exc:
                errors.append(str(exc))
        try:
            make_client(closed_port_url(), max_retries=0).complete(text_only(), CancelToken())
        except LlmError as exc:
            errors.append(str(exc))
        traced.close()
    server.assert_clean()
    assert all(r.headers["authorization"] == f"Bearer {SECRET}" for r in server.requests)
    assert len(errors) == 3 and "***" in errors[1]
    assert SECRET not in caplog.text
    assert all(SECRET not in error for error in errors)
    assert SECRET not in repr(client) and SECRET not in str(client)
    trace = trace_path.read_text()
    assert SECRET not in trace
    assert [json.loads(line)["kind"] for line in trace.splitlines()] == [
        "request", "response", "request", "response", "request", "error", "request", "error"]


@pytest.mark.parametrize("message, finish, expected", [
    ({"role": "assistant", "content": None}, "stop", {"text": ""}),
    ({"content": "  "}, "stop", {"text": "  "}),
    ({"content": ""}, "length", {"text": "", "finish_reason": "length"}),
    ({"content": [{"type": "text", "text": "a "}, {"type": "text", "text": "b"}]}, "stop",
     {"text": "a b"}),
    ({"content": None, "refusal": "I can't help with that."}, "stop",
     {"text": "", "refusal": "I can't help with that."}),
    ({"content": "x", "reasoning_content": "thought"}, "stop", {"reasoning": "thought"}),
    ({"content": "x", "reasoning": "newer vLLM field"}, "stop", {"reasoning": "newer vLLM field"}),
    ({"content": None, "tool_calls": [{"id": "call_9", "type": "function", "function": {
        "name": "segment_phrase", "arguments": '{"text_prompt": "cup"}'}}]}, "tool_calls",
     {"tool_calls": (NativeToolCall("call_9", "segment_phrase", '{"text_prompt": "cup"}'),)}),
    ({"content": None, "tool_calls": [{"id": "c", "type": "function", "function": {
        "name": "report_no_mask", "arguments": "{not json"}}]}, "tool_calls",
     {"tool_calls": (NativeToolCall("c", "report_no_mask", "{not json"),)}),
])
def test_model_reply_shapes_are_returned_as_they_came(message, finish, expected):
    body = {"choices": [{"index": 0, "message": message, "finish_reason": finish}]}
    with ScriptedServer([raw_body(body)]) as server:
        reply = make_client(server.base_url).complete(text_only(), CancelToken())
    for name, value in expected.items():
        assert getattr(reply, name) == value, name
    assert reply.finish_reason == finish


def test_tools_and_max_tokens_are_sent_and_zero_max_tokens_is_left_out():
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    with ScriptedServer(["a", "b"]) as server:
        make_client(server.base_url, max_tokens=123).complete(text_only(), CancelToken(),
                                                              tools=tools)
        make_client(server.base_url, max_tokens=0).complete(text_only(), CancelToken())
    first, second = (r.body for r in server.requests)
    assert first["tools"] == tools and first["tool_choice"] == "auto"
    assert first["max_tokens"] == 123
    assert "tools" not in second and "max_tokens" not in second


def test_parameters_a_reasoning_model_rejects_are_adapted_once_and_kept():
    """GPT-5-style 400s: max_tokens -> max_completion_tokens, temperature left out."""
    script = [http_error(400, "Unsupported parameter: 'max_tokens' is not supported with this "
                              "model. Use 'max_completion_tokens' instead."),
              http_error(400, "Unsupported value: 'temperature' does not support 0.0 with this "
                              "model. Only the default (1) value is supported."),
              "first", "second"]
    with ScriptedServer(script) as server:
        client = make_client(server.base_url, max_tokens=500)
        assert client.complete(text_only(), CancelToken()).text == "first"
        assert client.complete(text_only(), CancelToken()).text == "second"
    bodies = [r.body for r in server.requests]
    assert "max_tokens" in bodies[0] and "temperature" in bodies[0]
    assert bodies[1]["max_completion_tokens"] == 500 and "max_tokens" not in bodies[1]
    for body in bodies[2:]:
        assert "temperature" not in body and body["max_completion_tokens"] == 500


def test_a_second_rejection_of_the_same_parameter_is_an_error():
    message = ("Unsupported parameter: 'max_tokens' is not supported with this model. Use "
               "'max_completion_tokens' instead.")
    with ScriptedServer([http_error(400, message)] * 2) as server, \
            pytest.raises(LlmError, match="max_completion_tokens"):
        make_client(server.base_url).complete(text_only(), CancelToken())
    assert len(server.requests) == 2

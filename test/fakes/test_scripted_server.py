"""The scripted server itself, driven with plain http.client (no openai SDK)."""

import http.client
import json
import threading

import numpy as np
import pytest

from sam3_agent_ros.llm.encoding import encode_data_url
from test.fakes.scripted_server import (
    EXHAUSTED_MESSAGE,
    Reply,
    ScriptedServer,
    SilentServer,
    count_images,
    decode_image,
    drop_connection,
    http_error,
    is_verifier_request,
    message_text,
    raw_body,
    slow,
    tool_call,
    verdict,
)

MAIN_SYSTEM = {"role": "system", "content": "Plan tool calls."}
VERIFIER_SYSTEM = {"role": "system", "content": "Reply <verdict>Accept</verdict> or Reject."}


def post(server, body, path="/v1/chat/completions", connection=None):
    connection = connection or http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    connection.request("POST", path, raw, {"Content-Type": "application/json",
                                           "Authorization": "Bearer k"})
    response = connection.getresponse()
    return response.status, dict(response.getheaders()), response.read()


def chat(system=MAIN_SYSTEM, user="q"):
    return {"model": "m", "messages": [system, {"role": "user", "content": user}]}


def content_of(raw):
    return json.loads(raw)["choices"][0]["message"]["content"]


def test_script_is_answered_in_order_and_recorded():
    with ScriptedServer([Reply(text="first", prompt_tokens=3, completion_tokens=2),
                         tool_call("segment_phrase", text_prompt="cup")]) as server:
        status, headers, raw = post(server, chat(user="one"))
        assert status == 200 and headers["Content-Type"] == "application/json"
        reply = json.loads(raw)
        assert reply["choices"][0]["message"] == {"role": "assistant", "content": "first"}
        assert reply["usage"] == {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
        assert reply["model"] == "m"
        assert content_of(post(server, chat(user="two"))[2]) == (
            '<tool>{"name": "segment_phrase", "parameters": {"text_prompt": "cup"}}</tool>')
    server.assert_clean()
    assert [r.index for r in server.requests] == [0, 1]
    assert [message_text(r.messages[1]) for r in server.requests] == ["one", "two"]
    assert server.requests[0].headers["authorization"] == "Bearer k"
    assert server.requests[0].size_bytes == len(json.dumps(chat(user="one")))


def test_exhausted_script_answers_500_and_fails_assert_clean():
    with ScriptedServer(["only"]) as server:
        post(server, chat())
        status, _, raw = post(server, chat())
    assert status == 500
    assert json.loads(raw)["error"]["message"] == EXHAUSTED_MESSAGE
    assert server.unexpected_calls == 1
    with pytest.raises(AssertionError, match="no more replies"):
        server.assert_clean()


def test_unconsumed_steps_fail_assert_clean_unless_allowed():
    with ScriptedServer(["a", "b"]) as server:
        post(server, chat())
    with pytest.raises(AssertionError, match="1 scripted step"):
        server.assert_clean()
    server.assert_clean(all_consumed=False)


def test_verifier_requests_are_classified_and_answered_separately():
    with ScriptedServer(["main reply"], verifier=lambda body: verdict(True)) as server:
        for _ in range(3):
            assert "<verdict>Accept</verdict>" in content_of(post(server, chat(VERIFIER_SYSTEM))[2])
        assert content_of(post(server, chat())[2]) == "main reply"
    server.assert_clean()
    assert [r.kind for r in server.requests] == ["verifier"] * 3 + ["main"]
    assert len(server.main_requests) == 1 and len(server.verifier_requests) == 3


def test_verifier_list_and_custom_classifier():
    with ScriptedServer(["main"], verifier=[verdict(False)],
                        classify=lambda body: body.get("model") == "judge") as server:
        assert "Reject" in content_of(post(server, {**chat(), "model": "judge"})[2])
        assert content_of(post(server, chat(VERIFIER_SYSTEM))[2]) == "main"
    server.assert_clean()


def test_responder_sees_the_request_and_failures_count_as_unexpected():
    def responder(body):
        text = message_text(body["messages"][-1])
        if text == "boom":
            raise RuntimeError("no rule")
        return None if text == "none" else f"echo {text}"

    with ScriptedServer(responder=responder) as server:
        assert content_of(post(server, chat(user="hi"))[2]) == "echo hi"
        assert post(server, chat(user="boom"))[0] == 500
        assert post(server, chat(user="none"))[0] == 500
    assert server.unexpected_calls == 2
    assert "RuntimeError: no rule" in server.problems[0]


@pytest.mark.parametrize("step, status, body", [
    (http_error(429, "slow down", retry_after=1), 429, None),
    (http_error(401), 401, None),
    (raw_body("not json"), 200, b"not json"),
    (raw_body({}), 200, b"{}"),
    (Reply(text=None), 200, None),
])
def test_error_and_raw_steps(step, status, body):
    with ScriptedServer([step]) as server:
        got_status, headers, raw = post(server, chat())
    assert got_status == status
    if body is not None:
        assert raw == body
    if status == 429:
        assert headers["Retry-After"] == "1"
        assert json.loads(raw)["error"] == {"message": "slow down", "type": "rate_limit_error",
                                            "code": 429}
    if step.text is None and step.body is None and status == 200:
        assert content_of(raw) is None
    server.assert_clean()


def test_dropped_connection_and_keep_alive():
    with ScriptedServer(["a", "b", drop_connection()]) as server:
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
        assert content_of(post(server, chat(), connection=connection)[2]) == "a"
        assert content_of(post(server, chat(), connection=connection)[2]) == "b"  # same socket
        with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
            post(server, chat(), connection=connection)
    server.assert_clean()


def test_requests_are_served_concurrently():
    barrier = threading.Barrier(4, timeout=10)  # breaks (-> 500) if the server serialised them

    def responder(body):
        barrier.wait()
        return "together"

    with ScriptedServer(responder=responder) as server:
        results = []
        threads = [threading.Thread(target=lambda: results.append(post(server, chat())[0]))
                   for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert results == [200] * 4
    server.assert_clean()


def test_stop_wakes_a_delayed_reply():
    server = ScriptedServer([slow("never", 60)]).start()
    outcome = []

    def call():
        try:
            outcome.append(post(server, chat())[0])
        except (ConnectionError, http.client.HTTPException) as exc:
            outcome.append(type(exc).__name__)

    caller = threading.Thread(target=call)
    caller.start()
    while not server.requests:
        threading.Event().wait(0.01)
    server.stop()
    caller.join(timeout=10)
    assert not caller.is_alive()
    assert outcome and outcome[0] != 200


def test_unknown_paths_and_non_json_bodies_are_unexpected():
    with ScriptedServer([]) as server:
        assert post(server, chat(), path="/v1/completions")[0] == 404
        assert post(server, b"{not json")[0] == 400
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
        connection.request("GET", "/v1/models")
        models = json.loads(connection.getresponse().read())
    assert models["data"][0]["id"] == "scripted-model"
    assert server.unexpected_calls == 2


def test_add_extends_the_script_while_running():
    with ScriptedServer([]) as server:
        server.add("late", text_step := "later")
        assert content_of(post(server, chat())[2]) == "late"
        assert content_of(post(server, chat())[2]) == text_step
    server.assert_clean()


def test_request_helpers():
    image = np.zeros((20, 30, 3), np.uint8)
    image[:, :, 2] = 255
    url = encode_data_url(image, "png")
    body = {"messages": [
        VERIFIER_SYSTEM,
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}},
                                     {"type": "text", "text": "a"},
                                     {"type": "image_url", "image_url": {"url": url}}]}]}
    assert count_images(body) == 2
    assert is_verifier_request(body) and not is_verifier_request(chat())
    assert message_text(body["messages"][1]) == "a"
    np.testing.assert_array_equal(decode_image(url), image)
    with pytest.raises(ValueError):
        decode_image("http://example.invalid/x.png")


def test_the_silent_server_accepts_and_never_answers():
    with SilentServer() as server:
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=0.3)
        connection.request("POST", "/v1/chat/completions", b"{}")
        with pytest.raises(TimeoutError):
            connection.getresponse()
        assert server.connections == 1
        assert server.base_url == f"http://127.0.0.1:{server.port}/v1"
        connection.close()

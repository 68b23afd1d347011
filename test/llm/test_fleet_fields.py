"""What a fleet's client sends besides the messages (interface §14): the scheduling priority,
the extra body fields and headers, each shown in the ``--trace`` log with secrets redacted; and
nothing of it by default, so one robot sends what it always sent."""

import json

import pytest

from sam3_agent_ros.config import Config, ConfigError, LlmConfig
from sam3_agent_ros.core.cancel import CancelToken
from sam3_agent_ros.core.types import Message
from sam3_agent_ros.llm.openai_client import OpenAiClient
from sam3_agent_ros.llm.trace import TracingClient
from test.fakes.scripted_server import ScriptedServer

KEY_ENV = "SAM3_AGENT_TEST_API_KEY"
FLEET = {"llm.priority": 10,
         "llm.extra_body": '{"cache_salt": "tenant-a-9f8e7d", "router_hint": {"pool": "b"}}',
         "llm.extra_headers": '{"X-Tenant": "lab-a", "X-Api-Key": "sk-hidden-1234"}'}


@pytest.fixture(autouse=True)
def api_key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "EMPTY")


def client_for(server, **params):
    config = Config.from_params({"llm.base_url": server.base_url, "llm.api_key_env": KEY_ENV,
                                 **params})
    return OpenAiClient(config.llm)


def question():
    return [Message.text("system", "you are a planner"), Message.text("user", "the red cup")]


def test_the_defaults_send_no_priority_no_extra_field_no_extra_header():
    with ScriptedServer(["ok"]) as server:
        client_for(server).complete(question(), CancelToken())
    body, headers = server.requests[0].body, server.requests[0].headers
    assert set(body) == {"messages", "model", "max_tokens", "temperature"}
    assert "x-tenant" not in headers


def test_priority_extra_body_and_headers_are_sent_with_every_request():
    with ScriptedServer(["one", "two"]) as server:
        client = client_for(server, **FLEET)
        client.complete(question(), CancelToken())
        client.complete(question(), CancelToken())
    for request in server.requests:
        assert request.body["priority"] == 10
        assert request.body["cache_salt"] == "tenant-a-9f8e7d"
        assert request.body["router_hint"] == {"pool": "b"}
        assert request.body["max_tokens"] == 8192 and request.body["model"]
        assert request.headers["x-tenant"] == "lab-a"
        assert request.headers["x-api-key"] == "sk-hidden-1234"
        assert request.headers["authorization"] == "Bearer EMPTY"


def test_the_trace_shows_what_was_sent_with_secrets_redacted(tmp_path):
    trace = tmp_path / "trace.jsonl"
    with ScriptedServer(["ok"]) as server:
        client = TracingClient(client_for(server, **FLEET), trace)
        client.complete(question(), CancelToken())
        client.close()
    text = trace.read_text()
    request = json.loads(text.splitlines()[0])
    assert request["sent"] == {"priority": 10,
                               "extra_body": {"cache_salt": "***", "router_hint": {"pool": "b"}},
                               "extra_headers": {"X-Tenant": "lab-a", "X-Api-Key": "***"}}
    assert "tenant-a-9f8e7d" not in text and "sk-hidden-1234" not in text


def test_the_trace_of_a_default_client_says_nothing_extra_was_sent(tmp_path):
    trace = tmp_path / "trace.jsonl"
    with ScriptedServer(["ok"]) as server:
        client = TracingClient(client_for(server), trace)
        client.complete(question(), CancelToken())
        client.close()
    assert json.loads(trace.read_text().splitlines()[0])["sent"] == {
        "priority": None, "extra_body": None, "extra_headers": None}


def test_a_client_built_from_an_unchecked_section_still_refuses_a_bad_body():
    with pytest.raises(ConfigError, match="'model' is set by the client"):
        OpenAiClient(LlmConfig(extra_body='{"model": "other"}', api_key_env=KEY_ENV))

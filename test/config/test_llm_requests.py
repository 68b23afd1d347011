"""llm.extra_body / llm.extra_headers and the other §14 parameters checked at start-up."""

import pytest

from sam3_agent_ros.config import Config, ConfigError
from sam3_agent_ros.config.llm_requests import MAX_EXTRA_BYTES, extra_body, extra_headers


def test_defaults_send_nothing_extra():
    config = Config()
    assert (config.llm.priority, config.llm.extra_body, config.llm.extra_headers) == (0, "", "")
    assert (config.llm.max_in_flight, config.llm.retry_jitter) == (8, 0.5)
    assert extra_body("") == {} and extra_headers("  ") == {}


def test_a_cache_salt_and_a_router_header_pass():
    config = Config.from_params({"llm.extra_body": '{"cache_salt": "tenant-a"}',
                                 "llm.extra_headers": '{"X-Tenant": "lab-a"}',
                                 "llm.priority": 5})
    assert extra_body(config.llm.extra_body) == {"cache_salt": "tenant-a"}
    assert extra_headers(config.llm.extra_headers) == {"X-Tenant": "lab-a"}


@pytest.mark.parametrize("key", ["model", "messages", "max_tokens", "max_completion_tokens",
                                 "temperature", "tools", "tool_choice", "stream", "Priority"])
def test_body_keys_the_client_sets_are_refused(key):
    with pytest.raises(ConfigError, match=f"llm.extra_body: '{key}' is set by the client"):
        Config.from_params({"llm.extra_body": f'{{"{key}": 1}}'})


def test_priority_in_the_body_points_at_llm_priority():
    with pytest.raises(ConfigError, match="use llm.priority"):
        extra_body('{"priority": -1}')


@pytest.mark.parametrize("text, problem", [
    ("[1, 2]", "is not a JSON object"),
    ("{cache_salt: a}", "not JSON"),
    ('"a"', "is not a JSON object"),
    ("[" * 30 + "]" * 30, "is not a JSON object"),
    ('{"a": ' + "[" * 30 + "]" * 30 + "}", "nested deeper"),
])
def test_malformed_bodies_are_refused_with_the_reason(text, problem):
    with pytest.raises(ConfigError, match=problem):
        Config.from_params({"llm.extra_body": text})


def test_the_4096_byte_bound_counts_bytes_not_characters():
    fits = '{"a": "' + "x" * (MAX_EXTRA_BYTES - 9) + '"}'
    assert len(fits.encode()) == MAX_EXTRA_BYTES
    assert extra_body(fits)["a"].startswith("x")
    wide = '{"a": "' + "é" * 2100 + '"}'  # 2109 characters, 4209 bytes
    with pytest.raises(ConfigError, match=f"4209 bytes, more than the {MAX_EXTRA_BYTES}"):
        extra_body(wide)
    with pytest.raises(ConfigError, match="bytes, more than"):
        extra_headers('{"X-A": "' + "é" * 2100 + '"}')


@pytest.mark.parametrize("name", ["Authorization", "authorization", "Content-Type",
                                  "content-length", "Host", "Transfer-Encoding"])
def test_headers_the_client_owns_are_refused(name):
    with pytest.raises(ConfigError, match="llm.extra_headers"):
        Config.from_params({"llm.extra_headers": f'{{"{name}": "x"}}'})


def test_authorization_names_where_the_key_goes():
    with pytest.raises(ConfigError, match="llm.api_key_env"):
        extra_headers('{"Authorization": "Bearer sk-1"}')


@pytest.mark.parametrize("text, problem", [
    ('{"X-A": 1}', "not a string"),
    ('{"X-A": "a\\r\\nX-Injected: 1"}', "control characters"),
    ('{"X A": "v"}', "not a valid HTTP header name"),
    ('{"X-A": "v", "x-a": "w"}', "given twice"),
])
def test_bad_headers_are_refused_with_the_reason(text, problem):
    with pytest.raises(ConfigError, match=problem):
        extra_headers(text)


@pytest.mark.parametrize("name, value", [("llm.max_in_flight", 0), ("llm.retry_jitter", -0.1),
                                         ("llm.retry_jitter", 11.0)])
def test_the_cap_and_the_jitter_are_bounded(name, value):
    with pytest.raises(ConfigError, match=name):
        Config.from_params({name: value})

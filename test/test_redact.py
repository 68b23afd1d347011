"""Credentials in URLs never shown: the pure functions of sam3_agent_ros/redact.py."""

from __future__ import annotations

import json
import logging

import pytest

from sam3_agent_ros.redact import (
    has_credentials,
    install_log_redaction,
    is_secret_name,
    redact_text,
    redact_url,
    redact_value,
    url_secrets,
)

ATTACK_URL = "http://user:pass@host/v1?api-key=K"


def test_the_attack_url_keeps_host_and_path_but_no_secret():
    shown = redact_url(ATTACK_URL)
    assert shown == "http://***@host/v1?api-key=***"
    assert "pass" not in shown and "user" not in shown and "=K" not in shown


@pytest.mark.parametrize("url, expected", [
    ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1"),
    ("https://TOKEN@api.example.com/v1", "https://***@api.example.com/v1"),
    ("https://u:p@ss@host:443/v1", "https://***@host:443/v1"),  # last @ ends the user info
    ("https://u:pa/ss@host/v1", "https://***@host/v1"),  # an unescaped / in the password
    ("https://h/v1?model=m&API_KEY=K&x=1", "https://h/v1?model=m&API_KEY=***&x=1"),
    ("https://h/v1?key=K;token=T", "https://h/v1?key=***;token=***"),
    ("https://h/v1?access_token=T&sig=S&signature=S2",
     "https://h/v1?access_token=***&sig=***&signature=***"),
    ("https://h/v1?password=P&client_secret=C&Authorization=A",
     "https://h/v1?password=***&client_secret=***&Authorization=***"),
    ("https://h/cb#access_token=T&state=s", "https://h/cb#access_token=***&state=s"),
    ("https://h/v1?model=m#frag", "https://h/v1?model=m#frag"),
    ("https://h/v1?api-key=", "https://h/v1?api-key=***"),
    ("not a url", "not a url"),
])
def test_redact_url(url, expected):
    assert redact_url(url) == expected


def test_secret_names_are_case_insensitive_and_tuning_names_are_not_secret():
    for name in ("api-key", "api_key", "Api-Key", "KEY", "token", "access_token", "sig",
                 "signature", "password", "secret", "auth", "authorization", "X-Goog-Api-Key"):
        assert is_secret_name(name), name
    for name in ("model", "format", "region", "v", "stream"):
        assert not is_secret_name(name), name


def test_every_url_in_free_text_is_redacted_and_the_rest_kept():
    text = (f"Connection error: cannot connect to {ATTACK_URL} (errno 111); "
            f"also tried '{ATTACK_URL}/chat/completions', see https://docs.example.com/x.")
    shown = redact_text(text)
    assert "pass" not in shown and "=K" not in shown
    assert shown.startswith("Connection error: cannot connect to http://***@host/v1?api-key=*** ")
    assert "'http://***@host/v1/chat/completions'" not in shown  # the query came first
    assert "https://docs.example.com/x." in shown


def test_redacting_twice_changes_nothing():
    once = redact_text(f"HTTP 404 from {ATTACK_URL}: no route (see {ATTACK_URL}).")
    assert once == ("HTTP 404 from http://***@host/v1?api-key=***: no route (see "
                    "http://***@host/v1?api-key=***).")
    assert redact_text(once) == once


def test_key_like_parameters_of_a_bare_path_are_hidden_too():
    shown = redact_text("no route /v1/?api-key=K-123chat/completions (model=m&token=T)")
    assert shown == "no route /v1/?api-key=*** (model=m&token=***"
    assert redact_text("x=1 and a?b=2") == "x=1 and a?b=2"


def test_url_secrets_lists_the_parts_to_hide_longest_first():
    assert url_secrets("http://operator:hunter2@h/v1?api-key=K-9f3a&model=m&sig=ab") == [
        "operator:hunter2", "operator", "hunter2", "K-9f3a"]  # "ab" too short to replace
    assert url_secrets("http://127.0.0.1:8000/v1") == [] and url_secrets("no url") == []


def test_a_url_inside_json_text_ends_with_its_string():
    line = json.dumps({"error": f"HTTP 500 from {ATTACK_URL}", "n": 1})
    shown = redact_text(line)
    assert json.loads(shown) == {"error": "HTTP 500 from http://***@host/v1?api-key=***", "n": 1}


def test_redact_value_walks_nested_data_and_keeps_other_types():
    data = {"llm.base_url": ATTACK_URL, "llm.max_tokens": 8192, "ok": True, "none": None,
            "list": [ATTACK_URL, 1.5], "tuple": (ATTACK_URL,)}
    shown = redact_value(data)
    assert shown["llm.max_tokens"] == 8192 and shown["ok"] is True and shown["none"] is None
    assert shown["list"][1] == 1.5 and isinstance(shown["tuple"], tuple)
    assert "pass" not in json.dumps(shown, default=list) and "=K" not in json.dumps(
        shown, default=list)
    assert data["llm.base_url"] == ATTACK_URL  # a copy: the input is unchanged


def test_log_records_of_any_logger_are_redacted_message_args_and_traceback(caplog):
    install_log_redaction()
    install_log_redaction()  # idempotent
    caplog.set_level(logging.INFO)
    logging.getLogger("httpx").info('HTTP Request: %s %s "%s"', "POST",
                                    ATTACK_URL + "/chat/completions", "HTTP/1.1 200 OK")
    try:
        raise ConnectionError(f"cannot reach {ATTACK_URL}")
    except ConnectionError:
        logging.getLogger("sam3_agent_ros.test").exception("failed on %s", ATTACK_URL)
    logging.getLogger("plain").info("%d%% done, no url", 100)
    text = caplog.text
    assert "http://***@host/v1?api-key=***" in text
    assert "pass" not in text and "=K" not in text
    assert "ConnectionError" in text  # the traceback is still there
    assert "100% done, no url" in text


@pytest.mark.parametrize("url, expected", [
    ("http://user:pass@host/v1", True), ("http://host/v1?api-key=K", True),
    ("http://host/v1#access_token=T", True), ("http://host:8000/v1", False),
    ("http://host/v1?model=qwen", False), ("http://***@host/v1?api-key=***", False),
])
def test_has_credentials_is_what_the_redaction_would_hide(url, expected):
    assert has_credentials(url) is expected

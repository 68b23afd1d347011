"""Credentials in ``llm.base_url`` on the node. Issue 17 item 8: the URL appeared whole in the
result's error; issue 25: redacted in every output, but any peer read it in clear with
``get_parameters``. The node now refuses such a URL at start-up: it stays unconfigured with an
ERROR saying where the key goes (the variable named by ``llm.api_key_env``), and the parameter
holds the redacted URL from its declaration on, so no parameter service, no
``/parameter_events`` message and no log line ever carries the secret."""

from __future__ import annotations

import os

from rcl_interfaces.msg import ParameterEvent
from rcl_interfaces.srv import ListParameters
from rclpy.qos import qos_profile_parameter_events

from test.fakes.secret_url import attack_url, leaks, redacted_url
from test.ros.helpers import TRANSITION, Harness, NodeProcess

NS = "/secrets"
NODE = f"{NS}/sam3_agent"
HOST_PORT = "127.0.0.1:9"


def test_credentials_in_the_endpoint_are_refused_and_never_readable_by_a_peer(ros_env, tmp_path):
    harness = Harness("secrets_test")
    # Subscribed before the node starts: its declarations are published there too.
    harness.listen("/parameter_events", ParameterEvent, qos_profile_parameter_events)
    parameters = {"llm": {"backend": "openai", "base_url": attack_url(HOST_PORT),
                          "api_key_env": "SAM3_SECRET_TEST_KEY"},
                  "segmenter": {"backend": "color"},
                  "autostart": False}  # as under a lifecycle manager: it stays up, refusing
    env = dict(os.environ, **ros_env, SAM3_SECRET_TEST_KEY="sk-test-placeholder")
    node = NodeProcess(NS, parameters, tmp_path, env, offline=False)
    try:
        harness.wait_for(lambda: "the node cannot configure" in node.log()
                         or "autostart is false" in node.log(), 60, "the node's start-up")
        assert not harness.change_state(NODE, TRANSITION.TRANSITION_CONFIGURE)
        assert harness.lifecycle_state(NODE) == "unconfigured"
        names = harness._call(ListParameters, f"{NODE}/list_parameters",
                              ListParameters.Request(), 10).result.names
        values = harness.get_parameters(NODE, list(names))
        assert values["llm.base_url"] == redacted_url(HOST_PORT)
        assert leaks(repr(values)) == []
        # The declarations may go out before this subscription matched (test_params.py checks
        # them in-process); whatever came is free of the secret.
        assert leaks(repr(harness.messages("/parameter_events"))) == []
    finally:
        assert node.stop() == 0
        harness.close()
    log = node.log()
    assert (f"parameter refused at start-up: llm.base_url {redacted_url(HOST_PORT)} carries "
            "credentials") in log
    assert "environment variable named by llm.api_key_env (export " \
        "SAM3_SECRET_TEST_KEY=<key>)" in log
    assert "[ERROR]" in log and "restart the node with corrected start-up values" in log
    assert leaks(log) == [], log

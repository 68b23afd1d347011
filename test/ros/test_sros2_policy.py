"""config/sros2/sam3_agent_policy.xml against the node's live interfaces (issue 17 item 10).

The node runs twice (raw and compressed images), each with every optional interface on; the
union of what the ROS graph shows of them (topics published and subscribed, services served and
called, the action's hidden topics and services) must be exactly what the policy's node enclave
allows: none missing (the node would be denied it under SROS2), none extra (the policy would
allow more than the node needs). A new publisher, subscription, service or action of the node
fails this test until the policy names it.

The policy is expanded the way sros2's permissions template does it: ``/x`` absolute, ``~/x`` the
node's private name, other names relative to the profile's ``ns``; an action becomes its three
services and two topics.
"""

from __future__ import annotations

import os
import time
import xml.etree.ElementTree as ET

import pytest
from rclpy.node import NodeNameNonExistentError

from test.ros.helpers import REPO_ROOT, Harness, NodeProcess

POLICY = REPO_ROOT / "config" / "sros2" / "sam3_agent_policy.xml"
NODE_ENCLAVE, OPERATOR_ENCLAVE = "/sam3_agent", "/sam3_agent_operator"
CONSOLE_ENCLAVE = "/sam3_agent_console"
NODE = "sam3_agent"

# One node per entry, in its own namespace; together they switch every optional interface on.
# Extend when the node gains an option that adds an interface.
EVERY_INTERFACE_ON = {
    "/sros_raw": {"image_transport": "raw", "depth": {"enabled": True}, "use_sim_time": True,
                  "target_frame": "base_link",
                  "publish_overlay": True, "concepts": {"prompts": ["red object"]}},
    "/sros_compressed": {"image_transport": "compressed"},
}

ACTION_SERVICES = ("send_goal", "cancel_goal", "get_result")
ACTION_TOPICS = ("feedback", "status")
RULES = {"topics": ("publish", "subscribe"), "services": ("reply", "request"),
         "actions": ("execute", "call")}


# --- the policy, expanded --------------------------------------------------------------------

def full_name(name: str, ns: str, node: str) -> str:
    """sros2's name resolution: absolute, private (~/) or relative to ``ns``."""
    ns = ns if ns.endswith("/") else ns + "/"
    if name.startswith("/"):
        return name
    if name.startswith("~"):
        return f"{ns}{node}{name[1:]}"
    return f"{ns}{name}"


def allowed(profile: ET.Element) -> set[tuple[str, str]]:
    """``(kind, name)`` pairs a profile allows; kinds: publish, subscribe (topics), reply,
    request (services); actions expand to those (execute: the server's side, call: a client's)."""
    ns, node = profile.get("ns"), profile.get("node")
    found = set()
    for rule in profile:
        for kind in RULES[rule.tag]:
            if rule.get(kind) != "ALLOW":
                continue
            for item in rule:
                name = full_name(item.text.strip(), ns, node)
                if rule.tag != "actions":
                    found.add((kind, name))
                    continue
                server = kind == "execute"
                found |= {("reply" if server else "request", f"{name}/_action/{service}")
                          for service in ACTION_SERVICES}
                found |= {("publish" if server else "subscribe", f"{name}/_action/{topic}")
                          for topic in ACTION_TOPICS}
    return found


def profile_of(enclave: str) -> ET.Element:
    root = ET.parse(POLICY).getroot()
    (profile,) = root.findall(f"enclaves/enclave[@path='{enclave}']/profiles/profile")
    return profile


def diff(policy: set, live: set) -> str:
    """An empty string when they match; else what the policy lacks and what it has in excess."""
    lacks, excess = sorted(live - policy), sorted(policy - live)
    lines = [f"  the policy lacks (the node has it): {kind} {name}" for kind, name in lacks]
    lines += [f"  the policy allows (the node has no such interface): {kind} {name}"
              for kind, name in excess]
    return "\n".join(lines)


# --- the live graph --------------------------------------------------------------------------

def live_interfaces(harness: Harness, namespace: str) -> set[tuple[str, str]]:
    """What the graph shows of ``<namespace>/sam3_agent``, names moved to the root namespace
    (the policy's ``ns="/"``)."""
    node = harness.node
    found = set()
    for kind, query in (("publish", node.get_publisher_names_and_types_by_node),
                        ("subscribe", node.get_subscriber_names_and_types_by_node),
                        ("reply", node.get_service_names_and_types_by_node),
                        ("request", node.get_client_names_and_types_by_node)):
        for name, _types in query(NODE, namespace):
            if name.startswith(namespace + "/"):
                name = name[len(namespace):]
            found.add((kind, name))
    return found


@pytest.fixture(scope="module")
def every_interface_on(ros_env, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sros2")
    env = dict(os.environ, **ros_env)
    procs = {ns: NodeProcess(ns, params, tmp, env) for ns, params in EVERY_INTERFACE_ON.items()}
    harness = Harness("sros2_policy_test")
    try:
        for proc in procs.values():
            harness.wait_state(proc.name, "active", timeout=90)
        yield harness
    finally:
        for proc in procs.values():
            proc.stop()
        harness.close()


def test_the_node_enclave_allows_exactly_the_live_interfaces(every_interface_on):
    harness = every_interface_on
    policy = allowed(profile_of(NODE_ENCLAVE))
    deadline = time.monotonic() + 60  # graph discovery of a loaded machine: wait for a match
    while True:
        try:
            live = set().union(*(live_interfaces(harness, ns) for ns in EVERY_INTERFACE_ON))
        except NodeNameNonExistentError:  # its services answered, its graph entry is still on
            live = set()                   # the way (discovery is slower on a loaded machine)
        if live == policy or time.monotonic() >= deadline:
            break
        time.sleep(0.25)
    assert live == policy, "config/sros2/sam3_agent_policy.xml vs the node:\n" + diff(policy,
                                                                                       live)


# --- the policy file itself (no graph) -------------------------------------------------------

def test_the_comparison_reports_an_interface_the_policy_lacks():
    """What a later change adding a topic without a policy line would see."""
    policy = allowed(profile_of(NODE_ENCLAVE))
    live = policy | {("publish", "/sam3_agent/new_output")}
    assert diff(policy, live) == ("  the policy lacks (the node has it): publish "
                                  "/sam3_agent/new_output")
    assert "allows (the node has no such interface): reply /sam3_agent/stop_follow" in diff(
        policy, policy - {("reply", "/sam3_agent/stop_follow")})


def test_the_policy_has_the_sros2_policy_shape():
    root = ET.parse(POLICY).getroot()
    assert root.tag == "policy" and root.get("version") == "0.2.0"
    enclaves = root.findall("enclaves/enclave")
    assert [e.get("path") for e in enclaves] == [NODE_ENCLAVE, OPERATOR_ENCLAVE,
                                                 CONSOLE_ENCLAVE]
    for enclave in enclaves:
        for profile in enclave.findall("profiles/profile"):
            assert profile.get("ns") and profile.get("node")
            for rule in profile:
                assert rule.tag in RULES, rule.tag
                assert set(rule.attrib) <= set(RULES[rule.tag]) and rule.attrib
                assert set(rule.attrib.values()) <= {"ALLOW", "DENY"}
                assert all(item.tag == rule.tag[:-1] and item.text.strip() for item in rule)


def test_the_operator_may_ask_and_read_but_not_reconfigure():
    node = allowed(profile_of(NODE_ENCLAVE))
    operator = allowed(profile_of(OPERATOR_ENCLAVE))
    own = {(kind, name) for kind, name in operator
           if name.startswith("/sam3_agent_ask/") or name in ("/rosout", "/parameter_events")}
    counterpart = {"publish": "subscribe", "subscribe": "publish", "request": "reply"}
    for kind, name in sorted(operator - own):
        assert (counterpart[kind], name) in node, f"the node offers no {name} to {kind}"
    requests = {name for kind, name in operator if kind == "request"}
    for forbidden in ("set_parameters", "set_parameters_atomically", "change_state"):
        assert f"/sam3_agent/{forbidden}" not in requests
    assert ("publish", "/query") in operator
    assert ("request", "/sam3_agent/segment/_action/send_goal") in operator


def test_the_console_enclave_allows_what_the_console_uses_and_no_lifecycle():
    """The console's enclave (docs/security.md, lock-down 4): each interface one the node (or
    its camera) offers; set_parameters is there (concepts.prompts), the lifecycle is not; its
    own node serves nothing (test/console/test_ros_link.py checks that on a live graph)."""
    node = allowed(profile_of(NODE_ENCLAVE))
    console = allowed(profile_of(CONSOLE_ENCLAVE))
    own = {("publish", "/rosout"), ("publish", "/parameter_events"),
           ("subscribe", "/parameter_events")}
    camera = {("subscribe", "/image"), ("subscribe", "/image/compressed")}
    assert {kind for kind, _ in console} <= {"publish", "subscribe", "request"}
    counterpart = {"subscribe": "publish", "request": "reply"}
    for kind, name in sorted(console - own - camera):
        assert (counterpart[kind], name) in node, f"the node offers no {name} to {kind}"
    requests = {name for kind, name in console if kind == "request"}
    assert "/sam3_agent/set_parameters" in requests
    assert not {n for n in requests if n.endswith(("change_state", "set_parameters_atomically"))}
    # what the console subscribes and calls (console/ros_link.py, node_requests.py)
    for needed in ("/sam3_agent/status", "/sam3_agent/result", "/diagnostics",
                   "/sam3_agent/concepts/detections", "/sam3_agent/overlay/compressed"):
        assert ("subscribe", needed) in console
    assert ("request", "/sam3_agent/segment/_action/send_goal") in console

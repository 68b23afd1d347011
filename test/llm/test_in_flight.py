"""Cancel means disconnect, and the per-node cap (interface §14): the real openai client against
the scripted server, which records when its client goes while it is still "generating"."""

import random
import threading
import time

import pytest

from sam3_agent_ros.config import LlmConfig
from sam3_agent_ros.core.cancel import CancelToken
from sam3_agent_ros.core.errors import LlmError
from sam3_agent_ros.core.types import Message
from sam3_agent_ros.llm.attempts import retry_delay
from sam3_agent_ros.llm.in_flight import CallSlots
from sam3_agent_ros.llm.openai_client import OpenAiClient
from test.fakes.scripted_server import ScriptedServer, http_error, slow

KEY_ENV = "SAM3_AGENT_TEST_API_KEY"
GENERATING_S = 20.0  # the scripted reply's time: far longer than any bound checked here
DISCONNECT_BOUND_S = 1.0  # interface §14: the server sees the client go within 1 s


@pytest.fixture(autouse=True)
def api_key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "EMPTY")


def make_client(base_url, **overrides):
    options = {"timeout_s": 60.0, "max_retries": 0, "model": "test-model"}
    options.update(overrides)
    return OpenAiClient(LlmConfig(base_url=base_url, api_key_env=KEY_ENV, **options),
                        backoff_base_s=0.01)


def question():
    return [Message.text("system", "you are a planner"), Message.text("user", "the red cup")]


def wait_for(predicate, timeout_s=5.0):
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.005)
    return predicate()


def gone_after(server, stopped_at, index=0):
    """Seconds from the stop to the server seeing request ``index``'s client go."""
    assert wait_for(lambda: index in server.disconnects, 3.0), \
        "the server never saw the client disconnect"
    return server.disconnects[index] - stopped_at


def run_in_thread(client, cancel):
    errors = []

    def call():
        try:
            client.complete(question(), cancel)
        except LlmError as exc:
            errors.append(exc)

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    return thread, errors


@pytest.mark.parametrize("reason", ["cancelled", "preempted by a newer query"])
def test_a_cancelled_call_closes_its_connection_at_once(reason):
    with ScriptedServer([slow("late", GENERATING_S)]) as server:
        client = make_client(server.base_url)
        cancel = CancelToken()
        thread, errors = run_in_thread(client, cancel)
        assert wait_for(lambda: server.in_flight == 1)
        stopped_at = time.monotonic()
        cancel.cancel(reason)
        assert gone_after(server, stopped_at) < DISCONNECT_BOUND_S
        thread.join(2.0)
        assert errors and errors[0].kind == LlmError.CANCELLED
        assert client.slots.in_flight == 0  # the slot came back with the ended call


def test_the_query_deadline_closes_the_connection():
    with ScriptedServer([slow("late", GENERATING_S)]) as server:
        client = make_client(server.base_url)
        deadline = time.monotonic() + 0.4
        with pytest.raises(LlmError):
            client.complete(question(), CancelToken(deadline=deadline))
        assert gone_after(server, deadline) < DISCONNECT_BOUND_S


def test_llm_timeout_closes_the_connection():
    with ScriptedServer([slow("late", GENERATING_S)]) as server:
        client = make_client(server.base_url, timeout_s=0.4)
        started = time.monotonic()
        with pytest.raises(LlmError, match="did not answer"):
            client.complete(question(), CancelToken())
        assert gone_after(server, started + 0.4) < DISCONNECT_BOUND_S


def test_close_at_shutdown_cuts_every_call_in_flight():
    with ScriptedServer(responder=lambda body: slow("late", GENERATING_S)) as server:
        client = make_client(server.base_url)
        calls = [run_in_thread(client, CancelToken()) for _ in range(3)]
        assert wait_for(lambda: server.in_flight == 3)
        stopped_at = time.monotonic()
        client.close()
        for index in range(3):
            assert gone_after(server, stopped_at, index) < DISCONNECT_BOUND_S
        for thread, errors in calls:
            thread.join(2.0)
            assert errors and errors[0].kind == LlmError.CANCELLED


def test_a_kept_alive_connection_is_cut_for_the_call_that_reuses_it():
    """The second call rides the first one's kept-alive connection: cutting it still works."""
    with ScriptedServer(["first", slow("late", GENERATING_S)]) as server:
        client = make_client(server.base_url)
        assert client.complete(question(), CancelToken()).text == "first"
        cancel = CancelToken()
        thread, _ = run_in_thread(client, cancel)
        assert wait_for(lambda: server.in_flight == 1)
        stopped_at = time.monotonic()
        cancel.cancel()
        assert gone_after(server, stopped_at, 1) < DISCONNECT_BOUND_S
        thread.join(2.0)


def test_the_node_cap_bounds_calls_in_flight_and_a_waiting_call_stops_on_cancel():
    with ScriptedServer(responder=lambda body: slow("ok", 0.3)) as server:
        client = make_client(server.base_url, max_in_flight=3)
        threads = [run_in_thread(client, CancelToken()) for _ in range(7)]
        for thread, errors in threads:
            thread.join(5.0)
            assert not errors
        assert server.peak_in_flight == 3 and len(server.requests) == 7
        assert client.slots.peak == 3


def test_a_call_waiting_for_a_slot_ends_on_cancel_and_at_the_deadline():
    slots = CallSlots(1)
    held = slots.take(CancelToken())
    cancel = CancelToken()
    threading.Timer(0.1, cancel.cancel).start()
    started = time.monotonic()
    assert slots.take(cancel) is None
    assert slots.take(CancelToken(deadline=time.monotonic() + 0.1)) is None
    assert time.monotonic() - started < 1.0
    slots.give_back(held)
    assert slots.take(CancelToken()) is not None


def test_retry_after_is_spread_by_the_jitter_and_never_shortened():
    rng = random.Random(7)
    delays = [retry_delay(0, 2.0, 0.5, 8.0, 0.5, rng) for _ in range(200)]
    assert min(delays) >= 2.0 and max(delays) <= 3.0
    assert max(delays) - min(delays) > 0.8  # spread over most of t x jitter = 1 s
    assert retry_delay(0, 2.0, 0.5, 8.0, 0.0, rng) == 2.0  # jitter 0: exactly


def test_backoff_without_retry_after_has_full_jitter():
    rng = random.Random(7)
    delays = [retry_delay(3, None, 0.5, 8.0, 0.5, rng) for _ in range(200)]
    assert min(delays) < 0.5 and max(delays) > 3.5 and max(delays) <= 4.0
    assert retry_delay(5, None, 0.5, 8.0, 0.0, rng) == 8.0  # capped, no draw
    assert retry_delay(0, 30.0, 0.5, 8.0, 0.0, rng) == 0.5  # a Retry-After past the cap


def test_a_burst_answered_429_comes_back_spread_not_in_lockstep():
    """Ten robots get the same 429 Retry-After: 0.3 at once; their retries spread over the
    jitter (0.3 x 0.5 = 150 ms) instead of landing in the same few milliseconds, and none
    comes back earlier than the server asked. Each robot's own wait is timed (its call's
    duration), so a slow start on a loaded machine neither hides nor fakes the spread; the
    robots' random draws are seeded, so the spread they must show is known."""
    def call_durations(jitter):
        served = []
        lock = threading.Lock()

        def responder(body):
            with lock:
                served.append(time.monotonic())
                first_burst = len(served) <= 10
            return http_error(429, "busy", retry_after=0.3) if first_burst else "ok"

        durations = [0.0] * 10
        with ScriptedServer(responder=responder) as server:
            def robot(index):
                client = OpenAiClient(
                    LlmConfig(base_url=server.base_url, api_key_env=KEY_ENV, timeout_s=60.0,
                              max_retries=2, retry_jitter=jitter, model="test-model"),
                    backoff_base_s=0.01, rng=random.Random(index))
                start = time.monotonic()
                client.complete(question(), CancelToken())
                durations[index] = time.monotonic() - start

            threads = [threading.Thread(target=robot, args=(index,), daemon=True)
                       for index in range(10)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(10.0)
            assert len(server.requests) == 20
        return durations

    drawn = [0.3 * random.Random(index).uniform(0.0, 0.5) for index in range(10)]
    assert max(drawn) - min(drawn) > 0.1  # the seeds spread the draws over most of 150 ms
    spread = call_durations(0.5)
    assert min(spread) >= 0.3  # never earlier than Retry-After
    assert max(spread) - min(spread) > 0.05
    assert min(call_durations(0.0)) >= 0.3  # jitter 0: exactly Retry-After, never shortened

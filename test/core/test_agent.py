"""The agent loop driven by a scripted in-process LLM and box segmenters (no mocks of our code)."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from sam3_agent_ros.config import Config
from sam3_agent_ros.core import context
from sam3_agent_ros.core.agent import Agent
from sam3_agent_ros.core.cancel import CancelToken
from sam3_agent_ros.core.errors import LlmError
from sam3_agent_ros.core.types import Frame, Phase, Query, QueryStatus
from test.fakes.scripted_llm import ScriptedLlm, SlowLlm, examine, no_mask, segment, select, tool
from test.fakes.segmenters import (
    BoxSegmenter,
    PluginBoxSegmenter,
    RaisingSegmenter,
    WrongShapeSegmenter,
)

W, H = 320, 240
BOXES = {
    "cup": [(200, 50, 240, 100, 0.7), (20, 60, 60, 110, 0.9), (120, 40, 150, 90, 0.8)],
    "mug": [(20, 60, 60, 110, 0.95)],
    "bowl": [(100, 150, 180, 200, 0.6)],
}


def make_frame() -> Frame:
    image = np.random.default_rng(0).integers(0, 255, (H, W, 3), dtype=np.uint8)
    return Frame(image, stamp_sec=12, stamp_nanosec=345, frame_id="camera")


def run(llm, segmenter=None, query="the leftmost cup", cancel=None, statuses=None, **params):
    config = Config.from_params({f"agent.{k}": v for k, v in params.items()})
    agent = Agent(config, llm=llm, segmenter=segmenter or BoxSegmenter(BOXES))
    on_status = statuses.append if statuses is not None else None
    return agent.run(make_frame(), Query("q-1", query), cancel=cancel, on_status=on_status)


def accept_all(messages):
    return "Looks right. <verdict>Accept</verdict>"


def assert_invariants(llm: ScriptedLlm, max_messages: int = 10):
    for messages in llm.main_requests:
        assert context.check_messages(messages, max_messages) is None
        assert context.count_images(messages) <= 2
        assert len(messages) <= max_messages
    for messages in llm.verifier_requests:
        assert len(messages) == 2 and messages[0].role == "system"
        assert len(messages[1].images) == 3


def test_segment_then_select_returns_the_highest_scoring_mask_as_id_1():
    llm = ScriptedLlm([segment("cup"), select(1)])
    result = run(llm)
    assert result.status is QueryStatus.SUCCEEDED and result.error is None
    assert len(result.masks) == 1
    assert result.masks[0].score == pytest.approx(0.9)  # sorted by score: id 1 is the 0.9 box
    assert result.masks[0].bbox == (20, 60, 60, 110)
    assert result.text_prompts == ["cup"] and result.rounds == 2
    assert result.usage.prompt_tokens == 200 and result.usage.completion_tokens == 20
    table = llm.main_requests[1][-1].text_content
    assert "1 | 0.900 | 20,60,60,110" in table and "3 | 0.700 | 200,50,240,100" in table
    assert len(llm.main_requests[1][-1].images) == 1  # the numbered overlay


def test_result_json_follows_the_contract():
    result = run(ScriptedLlm([segment("cup"), select(2, 1)]))
    data = result.to_json()
    assert set(data) >= {"query_id", "query", "status", "error", "stamp", "frame_id", "width",
                         "height", "masks", "text_prompts", "rounds", "timings", "usage"}
    assert data["stamp"] == {"sec": 12, "nanosec": 345} and data["frame_id"] == "camera"
    assert (data["width"], data["height"]) == (W, H)
    assert [m["id"] for m in data["masks"]] == [1, 2]
    assert data["masks"][0]["score"] == pytest.approx(0.8)  # answer order = selection order
    assert data["masks"][0]["area"] == 30 * 50


def test_each_answer_mask_names_the_candidate_id_the_model_chose_it_by():
    """The model's reasoning numbers the candidates ("[2] is the leftmost"); the result's ids
    are 1..N in answer order: ``candidate`` joins the two (the console shows one numbering)."""
    data = run(ScriptedLlm([segment("cup"), select(2, 1)])).to_json()
    assert [(m["id"], m["candidate"]) for m in data["masks"]] == [(1, 2), (2, 1)]


def test_examine_keeps_accepted_masks_renumbered_in_previous_order():
    def reject_middle(messages):
        crop_key = messages[1].images[2].key
        return "<verdict>Reject</verdict>" if crop_key.endswith("mask-2-crop") else \
            "<verdict>Accept</verdict>"

    llm = ScriptedLlm([segment("cup"), examine(), select(2)], verifier=reject_middle)
    result = run(llm)
    assert result.status is QueryStatus.SUCCEEDED
    assert result.masks[0].score == pytest.approx(0.7)  # old id 3 became id 2
    summary = llm.main_requests[2][-1].text_content
    assert "kept 2 of 3" in summary and "rejected old ids [2]" in summary
    assert len(llm.verifier_requests) == 3
    assert_invariants(llm)


def test_the_result_keeps_every_mask_of_the_last_prompt_as_candidates():
    """The grasp scene's other objects: every mask the last executed prompt found, examine's
    rejected ones too (they are still on the table), the selected ones among them by pixels."""
    def reject_middle(messages):
        crop_key = messages[1].images[2].key
        return "<verdict>Reject</verdict>" if crop_key.endswith("mask-2-crop") else \
            "<verdict>Accept</verdict>"

    result = run(ScriptedLlm([segment("bowl"), segment("cup"), examine(), select(2)],
                             verifier=reject_middle))
    assert [m.score for m in result.candidates] == pytest.approx([0.9, 0.8, 0.7])
    assert any(c.mask is result.masks[0].mask for c in result.candidates)
    assert "candidates" not in result.to_json()
    assert run(ScriptedLlm([segment("cup"), no_mask()])).candidates == []


def test_verifier_images_never_enter_the_main_context():
    llm = ScriptedLlm([segment("cup"), examine(), select(1)], verifier=accept_all)
    run(llm)
    main_keys = {p.key for m in llm.main_requests for msg in m for p in msg.images}
    verifier_keys = {p.key for m in llm.verifier_requests for p in m[1].images}
    assert not any("examine" in k for k in main_keys)
    assert verifier_keys - main_keys  # the overlays/crops exist only in verifier calls
    assert all("verdict" not in msg.text_content.lower() or msg.role == "system"
               for m in llm.main_requests for msg in m[2:])


def test_repeated_prompt_is_refused_without_running_the_segmenter_and_examine_still_works():
    # The upstream agent crashes on exactly this sequence.
    segmenter = BoxSegmenter(BOXES)
    llm = ScriptedLlm([segment("cup"), segment("  Cup "), examine(), select(1)],
                      verifier=accept_all)
    result = run(llm, segmenter)
    assert result.status is QueryStatus.SUCCEEDED
    assert segmenter.calls == ["cup"]
    refusal = llm.main_requests[2][-1].text_content
    assert "NOT run" in refusal and '"cup"' in refusal
    assert_invariants(llm)


def test_replaced_prompts_are_listed_in_the_first_message():
    llm = ScriptedLlm([segment("cup"), segment("mug"), segment("bowl"), select(1)])
    result = run(llm)
    assert result.status is QueryStatus.SUCCEEDED
    assert "Note" not in llm.main_requests[1][1].text_content
    assert '"cup"' in llm.main_requests[2][1].text_content
    assert '"cup", "mug"' in llm.main_requests[3][1].text_content
    # pruning: only the latest segment call and its result follow messages[0:2]
    assert len(llm.main_requests[3]) == 4
    assert '"bowl"' in llm.main_requests[3][2].text_content


MISTAKES = {
    "no tool tag": ("I think it is the cup.", "no <tool> call"),
    "unclosed tag": ('<tool>{"name": "report_no_mask"}', "not closed"),
    "invalid json": ('<tool>{"name": "segment_phrase", parameters: {}}</tool>', "not valid JSON"),
    "not an object": ("<tool>[1, 2]</tool>", "JSON object"),
    "unknown tool": (tool("zoom_in", factor=2), "Unknown tool"),
    "missing parameter": (tool("segment_phrase"), "missing ['text_prompt']"),
    "extra parameter": (tool("segment_phrase", text_prompt="cup", k=3), "unexpected ['k']"),
    "wrong type": (tool("segment_phrase", text_prompt=5), "must be a JSON string"),
    "empty prompt": (tool("segment_phrase", text_prompt="  "), "non-empty"),
    "ids not integers": (tool("select_masks_and_return", final_answer_masks=["1"]), "integer"),
    "empty selection": (tool("select_masks_and_return", final_answer_masks=[]), "report_no_mask"),
    "examine without masks": (examine(), "there are none"),
    "select without masks": (select(1), "no current masks"),
    # Attacks on the parser (issue 17): Python's json raises RecursionError / ValueError here.
    "5000-deep json": ('<tool>{"name": "segment_phrase", "parameters": {"text_prompt": '
                       + "[" * 5000 + "]" * 5000 + "}}</tool>", "nested more than 32 levels"),
    "5000-digit integer": ('<tool>{"name": "select_masks_and_return", "parameters": '
                           '{"final_answer_masks": [' + "7" * 5000 + "]}}</tool>",
                           "a number of 5000 digits"),
    "1 MB text_prompt": (segment("blue " * 200_000), "more than 200"),
}


@pytest.mark.parametrize("name", sorted(MISTAKES))
def test_each_model_mistake_gets_a_corrective_turn_and_the_query_recovers(name):
    bad_reply, expected_hint = MISTAKES[name]
    llm = ScriptedLlm([bad_reply, segment("cup"), select(1)])
    result = run(llm)
    assert result.status is QueryStatus.SUCCEEDED, result.error
    correction = llm.main_requests[1][-1]
    assert correction.role == "user" and correction.text_content.startswith("Error:")
    assert expected_hint in correction.text_content
    assert_invariants(llm)


def test_ids_out_of_range_are_corrected():
    llm = ScriptedLlm([segment("cup"), select(4), select(0, 3), select(3)])
    result = run(llm)
    assert result.status is QueryStatus.SUCCEEDED
    assert "[4] do not exist" in llm.main_requests[2][-1].text_content
    assert "[0] do not exist" in llm.main_requests[3][-1].text_content
    assert result.masks[0].score == pytest.approx(0.7)


def test_text_after_the_first_tool_call_is_not_kept():
    reply = segment("cup") + ' then <tool>{"name": "report_no_mask"}</tool> trailing'
    llm = ScriptedLlm([reply, select(1)])
    result = run(llm)
    assert result.status is QueryStatus.SUCCEEDED
    kept = llm.main_requests[1][2].text_content
    assert kept.endswith("</tool>") and "report_no_mask" not in kept


def test_consecutive_mistakes_end_the_query_as_failed():
    llm = ScriptedLlm(["no tool", "still none", "nope"])
    result = run(llm, max_consecutive_mistakes=3)
    assert result.status is QueryStatus.FAILED
    assert "3 invalid model replies in a row" in result.error
    assert llm.exhausted


def test_a_valid_call_resets_the_mistake_counter():
    llm = ScriptedLlm(["bad", "bad", segment("cup"), "bad", "bad", select(1)])
    result = run(llm, max_consecutive_mistakes=3)
    assert result.status is QueryStatus.SUCCEEDED


def test_verifier_reply_without_verdict_is_retried_then_the_mask_is_rejected():
    calls = []

    def vague(messages):
        calls.append(messages[1].images[2].key)
        return "It might be a cup, hard to say."

    llm = ScriptedLlm([segment("mug"), examine(), no_mask()], verifier=vague)
    result = run(llm, verifier_retries=2)
    assert result.status is QueryStatus.NO_MASK
    assert len(calls) == 3  # one call + two retries for the single mask
    assert "rejected all 1 mask" in llm.main_requests[2][-1].text_content


def test_verifier_calls_run_concurrently_up_to_the_limit():
    active, peak, lock = [0], [0], threading.Lock()

    def slow_accept(messages):
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        time.sleep(0.05)
        with lock:
            active[0] -= 1
        return "<verdict>Accept</verdict>"

    class ConcurrentLlm(ScriptedLlm):  # verifier replies computed outside the script lock
        def complete(self, messages, cancel):
            if "<verdict>" in messages[0].text_content:
                from sam3_agent_ros.core.types import LlmReply

                return LlmReply(slow_accept(messages))
            return super().complete(messages, cancel)

    boxes = {"cup": [(10 * k, 10, 10 * k + 8, 20, 0.9 - 0.01 * k) for k in range(8)]}
    llm = ConcurrentLlm([segment("cup"), examine(), select(1)])
    result = run(llm, BoxSegmenter(boxes), examine_concurrency=3)
    assert result.status is QueryStatus.SUCCEEDED
    assert peak[0] == 3


def test_report_no_mask_ends_with_no_mask():
    result = run(ScriptedLlm([segment("giraffe"), no_mask()]))
    assert result.status is QueryStatus.NO_MASK and result.masks == [] and result.error is None


def test_max_rounds_ends_the_query():
    llm = ScriptedLlm([segment("cup"), segment("mug"), segment("bowl")])
    result = run(llm, max_rounds=3)
    assert result.status is QueryStatus.FAILED and "max_rounds=3" in result.error
    assert result.rounds == 3


def test_llm_error_ends_the_query_with_the_reason():
    result = run(ScriptedLlm([LlmError("HTTP 500 after 2 retries")]))
    assert result.status is QueryStatus.FAILED
    assert "LLM request failed: HTTP 500 after 2 retries" in result.error


def test_verifier_endpoint_failure_ends_the_query():
    def broken(messages):
        raise LlmError("connection refused")

    result = run(ScriptedLlm([segment("cup"), examine()], verifier=broken))
    assert result.status is QueryStatus.FAILED and "verifier request failed" in result.error


@pytest.mark.parametrize("segmenter, reason", [(RaisingSegmenter(), "CUDA out of memory"),
                                               (WrongShapeSegmenter(), "masks have shape")])
def test_segmenter_failures_end_the_query(segmenter, reason):
    result = run(ScriptedLlm([segment("cup")]), segmenter)
    assert result.status is QueryStatus.FAILED and reason in result.error


def test_timeout_aborts_an_in_flight_llm_call():
    started = time.monotonic()
    result = run(SlowLlm(), query_timeout_s=0.3)
    assert result.status is QueryStatus.FAILED and "timed out after 0.3 s" in result.error
    assert time.monotonic() - started < 10  # it returned, not hung


class HungEndpointLlm:
    """Waits out the query's deadline, then fails as the OpenAI client does for a hung server."""

    def complete(self, messages, cancel):
        cancel.wait(cancel.remaining())
        raise LlmError("the LLM endpoint http://gpu:8000/v1 did not answer within 0.3 s",
                       kind=LlmError.TIMEOUT, endpoint="http://gpu:8000/v1", attempts=1)


def test_a_timeout_while_waiting_for_the_llm_names_what_it_waited_for():
    result = run(HungEndpointLlm(), query_timeout_s=0.3)
    assert result.status is QueryStatus.FAILED
    assert result.error == ("query timed out after 0.3 s waiting for the LLM: the LLM endpoint "
                            "http://gpu:8000/v1 did not answer within 0.3 s")


def test_cancel_aborts_an_in_flight_llm_call():
    cancel = CancelToken()
    threading.Timer(0.2, cancel.cancel, args=("preempted by q-2",)).start()
    result = run(SlowLlm(), cancel=cancel, query_timeout_s=60)
    assert result.status is QueryStatus.CANCELLED and result.error == "preempted by q-2"


def test_cancel_before_start_makes_no_llm_call():
    cancel = CancelToken()
    cancel.cancel()
    llm = ScriptedLlm([])
    result = run(llm, cancel=cancel)
    assert result.status is QueryStatus.CANCELLED and llm.main_requests == []


@pytest.mark.parametrize("image, query, reason", [
    (np.zeros((0, 10, 3), np.uint8), "cup", "empty"),
    (np.zeros((10, 10), np.uint8), "cup", "RGB uint8"),
    (np.zeros((10, 10, 3), np.float32), "cup", "RGB uint8"),
    (np.zeros((10, 10, 3), np.uint8), "   ", "query text is empty"),
])
def test_bad_input_fails_without_calling_the_model(image, query, reason):
    llm = ScriptedLlm([])
    agent = Agent(Config(), llm=llm, segmenter=BoxSegmenter(BOXES))
    result = agent.run(Frame(image), Query("q", query))
    assert result.status is QueryStatus.FAILED and reason in result.error
    assert llm.main_requests == []


def test_status_events_follow_the_phases_and_end_with_done():
    statuses = []
    llm = ScriptedLlm([segment("cup"), examine(), select(1)], verifier=accept_all)
    run(llm, statuses=statuses)
    phases = [s.phase for s in statuses]
    assert phases == [Phase.THINKING, Phase.SEGMENTING, Phase.THINKING, Phase.EXAMINING,
                      Phase.THINKING, Phase.DONE]
    assert statuses[1].text_prompt == "cup" and statuses[-1].status == "succeeded"
    assert statuses[2].num_masks == 3 and statuses[2].context_images == 2
    data = statuses[0].to_json()
    assert set(data) >= {"query_id", "phase", "round", "tool", "text_prompt", "num_masks",
                         "context", "elapsed_s"}


def test_a_failing_status_callback_does_not_break_the_query():
    def broken(event):
        raise RuntimeError("observer bug")

    agent = Agent(Config(), llm=ScriptedLlm([segment("cup"), select(1)]),
                  segmenter=BoxSegmenter(BOXES))
    result = agent.run(make_frame(), Query("q", "cup"), on_status=broken)
    assert result.status is QueryStatus.SUCCEEDED


def test_every_result_and_status_names_the_backends_of_its_config():
    config = Config.from_params({"llm.backend": "offline", "segmenter.backend": "pkg.mod:make"})
    agent = Agent(config, llm=ScriptedLlm([segment("cup"), select(1)]),
                  segmenter=BoxSegmenter(BOXES))
    statuses = []
    answered = agent.run(make_frame(), Query("q", "cup"), on_status=statuses.append)
    refused = agent.run(Frame(np.zeros((0, 10, 3), np.uint8)), Query("q2", "cup"))
    expected = {"llm": "offline", "segmenter": "pkg.mod:make"}
    assert answered.status is QueryStatus.SUCCEEDED and refused.status is QueryStatus.FAILED
    assert answered.to_json()["backends"] == refused.to_json()["backends"] == expected
    assert statuses and all(s.to_json()["backends"] == expected for s in statuses)


def test_masks_from_untrained_weights_mark_the_result():
    untrained = run(ScriptedLlm([segment("cup"), select(1)]), BoxSegmenter(BOXES, True))
    assert untrained.to_json()["untrained_weights"] is True
    # also when those detections were replaced or gave nothing: the query relied on them
    empty = run(ScriptedLlm([segment("unicorn"), no_mask()]), BoxSegmenter(BOXES, True))
    assert empty.status is QueryStatus.NO_MASK and empty.to_json()["untrained_weights"] is True
    trained = run(ScriptedLlm([segment("cup"), select(1)]), BoxSegmenter(BOXES))
    assert "untrained_weights" not in trained.to_json()


def test_a_plugin_answering_in_its_own_type_is_converted_at_the_port():
    result = run(ScriptedLlm([segment("cup"), select(1)]), PluginBoxSegmenter(BOXES))
    expected = run(ScriptedLlm([segment("cup"), select(1)]), BoxSegmenter(BOXES))
    assert result.status is QueryStatus.SUCCEEDED
    assert result.to_json()["masks"] == expected.to_json()["masks"]
    assert np.array_equal(result.masks[0].mask, expected.masks[0].mask)


def test_long_conversation_keeps_every_request_bounded_and_flat():
    """14 rounds: duplicates, examine with rejections, re-examining (refused), re-segmenting,
    mistakes."""
    def reject_second(messages):
        key = messages[1].images[2].key
        return "<verdict>Reject</verdict>" if "mask-2" in key else "<verdict>Accept</verdict>"

    script = [segment("cup"), examine(), segment("cup"), "oops no tool", segment("mug"),
              examine(), segment("bowl"), examine(), examine(), examine(), segment("cups"),
              segment("mug"), examine(), select(1)]
    boxes = dict(BOXES, cups=BOXES["cup"])
    llm = ScriptedLlm(script, verifier=reject_second)
    result = run(llm, BoxSegmenter(boxes))
    assert result.status is QueryStatus.SUCCEEDED, result.error
    assert result.rounds == 14
    assert_invariants(llm)
    sizes = [len(m) for m in llm.main_requests]
    assert max(sizes) <= 10
    last_first = llm.main_requests[-1][1].text_content
    assert '"cup", "mug", "bowl"' in last_first  # warning injection lists replaced prompts
    # cup: 3 masks; mug: 1; bowl: 1 (examined once: the next two examines are refused); cups: 3
    assert len(llm.verifier_requests) == 3 + 1 + 1 + 3


# --- attacks: budgets and bounds per query (issue 17) --------------------------------------------

def grid_boxes(count: int, score: float = 0.9) -> list[tuple]:
    """``count`` disjoint 10x10 boxes on the 320x240 frame."""
    return [(20 * (k % 16), 20 * (k // 16), 20 * (k % 16) + 10, 20 * (k // 16) + 10,
             score - k * 1e-4) for k in range(count)]


HUNDRED = {f"thing {k}": grid_boxes(100) for k in range(10)}


def test_a_model_examining_100_masks_again_and_again_gets_corrected_without_verifier_calls():
    """Text in the scene steers the model to examine over and over: only the first examine of
    the same masks runs; the repeats are refused (no verifier call) until the mistakes end it."""
    llm = ScriptedLlm([segment("thing 0")] + [examine()] * 10, verifier=accept_all)
    result = run(llm, BoxSegmenter(HUNDRED), max_consecutive_mistakes=3)
    assert result.status is QueryStatus.FAILED and "already examined" in result.error
    assert len(llm.verifier_requests) == 100  # the first examine only
    assert len(llm.main_requests) == 1 + 1 + 3  # segment, examine, three refused examines


def test_a_model_re_segmenting_and_examining_100_masks_stops_at_the_verifier_budget():
    """The same, with a new phrase before every examine: max_verifier_calls bounds the LLM calls
    (the issue saw 1,516 for one query)."""
    script = []
    for k in range(10):
        script += [segment(f"thing {k}"), examine()]
    llm = ScriptedLlm(script, verifier=accept_all)
    result = run(llm, BoxSegmenter(HUNDRED), max_verifier_calls=250)
    assert result.status is QueryStatus.FAILED
    assert "agent.max_verifier_calls=250" in result.error and "50 of" in result.error
    assert len(llm.verifier_requests) == 200  # two examines; the third never starts
    assert len(llm.main_requests) == 6


def test_an_examine_larger_than_the_budget_left_makes_no_verifier_call():
    llm = ScriptedLlm([segment("thing 0"), examine()], verifier=accept_all)
    result = run(llm, BoxSegmenter(HUNDRED), max_verifier_calls=99)
    assert result.status is QueryStatus.FAILED
    assert "needs at least 100 verifier calls, 99 of agent.max_verifier_calls=99" in result.error
    assert llm.verifier_requests == []


def test_verifier_retries_count_against_the_budget():
    """Replies without a verdict are retried: the budget still caps the calls, exactly."""
    llm = ScriptedLlm([segment("thing 0"), examine()], verifier=lambda messages: "Hmm.")
    result = run(llm, BoxSegmenter({"thing 0": grid_boxes(10)}), max_verifier_calls=15,
                 verifier_retries=2)
    assert result.status is QueryStatus.FAILED
    assert "all agent.max_verifier_calls=15 verifier calls" in result.error
    assert len(llm.verifier_requests) == 15


def test_a_megabyte_text_prompt_never_reaches_the_segmenter_nor_the_status():
    huge = "the " * 250_000
    segmenter = BoxSegmenter(BOXES)
    statuses: list = []
    llm = ScriptedLlm([segment(huge), segment("cup"), select(1)])
    result = run(llm, segmenter, statuses=statuses)
    assert result.status is QueryStatus.SUCCEEDED
    assert segmenter.calls == ["cup"]
    assert result.text_prompts == ["cup"]
    assert all(len(event.text_prompt or "") <= 200 for event in statuses)
    correction = llm.main_requests[1]
    assert "999999 characters long, more than 200" in correction[-1].text_content  # stripped
    refused = correction[-2]  # the model's own reply, cut short before it is sent back
    assert refused.role == "assistant" and len(refused.text_content) <= 4000
    assert sum(len(m.text_content) for m in llm.main_requests[2]) < 20_000


def test_the_text_prompt_cap_is_a_parameter():
    llm = ScriptedLlm([segment("blue cup"), segment("cup"), select(1)])
    result = run(llm, max_text_prompt_chars=5)
    assert result.status is QueryStatus.SUCCEEDED and result.text_prompts == ["cup"]
    assert "8 characters long, more than 5" in llm.main_requests[1][-1].text_content


def test_a_finished_query_frees_its_frame_without_waiting_for_the_garbage_collector():
    """A node answering goal after goal must not keep every query's frame until the next full
    collection (the examiner closure made each run a reference cycle)."""
    import gc
    import weakref

    def answer() -> weakref.ref:
        image = np.zeros((H, W, 3), np.uint8)
        agent = Agent(Config(), llm=ScriptedLlm([segment("cup"), examine(), select(1)],
                                                verifier=accept_all),
                      segmenter=BoxSegmenter(BOXES))
        result = agent.run(Frame(image), Query("q", "cup"))
        assert result.status is QueryStatus.SUCCEEDED
        return weakref.ref(image)

    gc.disable()
    try:
        assert answer()() is None
    finally:
        gc.enable()

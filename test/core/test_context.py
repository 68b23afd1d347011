import numpy as np

from sam3_agent_ros.core import context
from sam3_agent_ros.core.context import Turn, build_messages, check_messages, kept_turns
from sam3_agent_ros.core.types import ImagePart, Message, NativeToolCall

IMG = np.zeros((4, 4, 3), np.uint8)
SYSTEM = Message.text("system", "sys")


def first(replaced=()):
    return context.first_user_message(ImagePart(IMG, "frame"), "the cup", 4, 4, list(replaced))


def turn(name: str, segment=False, image=True) -> Turn:
    answer = (f"result {name}", ImagePart(IMG, f"overlay-{name}")) if image else (name,)
    return Turn(Message.text("assistant", f"call {name}"), Message("user", answer), segment)


def native_turn(name: str, segment=False, image=True) -> Turn:
    answer = (f"result {name}", ImagePart(IMG, f"overlay-{name}")) if image else (name,)
    call = NativeToolCall(f"id-{name}", "segment_phrase" if segment else "examine_each_mask", "{}")
    return Turn(Message("assistant", ("",), tool_calls=(call,)), Message("user", answer), segment)


def test_before_any_segment_all_turns_are_kept_within_the_bound():
    turns = [turn(f"bad{i}", image=False) for i in range(2)]
    assert kept_turns(turns, 10) == turns
    many = [turn(f"bad{i}", image=False) for i in range(7)]
    assert kept_turns(many, 10) == many[-4:]


def test_only_the_latest_segment_and_what_follows_is_kept():
    turns = [turn("s1", True), turn("e1"), turn("s2", True), turn("e2"), turn("bad", image=False)]
    assert kept_turns(turns, 10) == turns[2:]


def test_trimming_keeps_the_segment_turn_and_the_newest_turns():
    turns = [turn("s1", True)] + [turn(f"e{i}") for i in range(6)]
    kept = kept_turns(turns, 10)
    assert kept[0] is turns[0] and kept[1:] == turns[-3:]
    assert kept_turns(turns, 4) == turns[-1:]


def test_only_the_newest_image_survives():
    turns = [turn("s1", True), turn("e1"), turn("bad", image=False)]
    messages = build_messages(SYSTEM, first(), turns, 10)
    assert context.count_images(messages) == 2
    assert context.IMAGE_OMITTED in messages[3].text_content
    assert [p.key for p in messages[5].images] == ["overlay-e1"]
    assert check_messages(messages, 10) is None


def test_warning_lists_replaced_prompts():
    assert "Note" not in first().text_content
    text = first(["cup", "mug"]).text_content
    assert '"cup", "mug"' in text and "Do not use" in text


def test_check_messages_finds_each_violation():
    ok = build_messages(SYSTEM, first(), [turn("s", True)], 10)
    assert check_messages(ok, 10) is None
    assert "exceed" in check_messages(ok, 3)
    three = ok[:3] + [Message("user", ("x", ImagePart(IMG, "a"), ImagePart(IMG, "b")))]
    assert "images" in check_messages(three, 10)
    assert "messages[0]" in check_messages([ok[1], ok[0]], 10)
    assert "raw frame" in check_messages([SYSTEM, Message.text("user", "q")], 10)
    assert "role" in check_messages(ok[:2] + [ok[3], ok[2]], 10)
    assert "last message" in check_messages(ok[:3], 10)


def test_request_size_is_flat_however_many_turns():
    turns = []
    sizes = []
    for i in range(30):
        turns.append(turn(f"s{i}", segment=i % 3 == 0))
        sizes.append(len(build_messages(SYSTEM, first(), turns, 10)))
    assert max(sizes) <= 10


def test_a_native_turn_is_call_then_tool_message_then_the_image_in_a_user_message():
    messages = context.render_turn(native_turn("s", True), keep_images=True)
    assert [m.role for m in messages] == ["assistant", "tool", "user"]
    assert messages[1].tool_call_id == "id-s" and messages[1].text_content == "result s"
    assert not messages[1].images and [p.key for p in messages[2].images] == ["overlay-s"]
    older = context.render_turn(native_turn("s", True), keep_images=False)
    assert [m.role for m in older] == ["assistant", "tool"]
    assert context.IMAGE_OMITTED in older[1].text_content


def test_native_pruning_counts_three_message_turns_and_keeps_calls_with_their_answers():
    turns = [native_turn("s1", True), native_turn("e1")] + \
        [native_turn(f"bad{i}", image=False) for i in range(5)]
    for bound in (5, 6, 7, 8, 10, 12):
        messages = build_messages(SYSTEM, first(), turns, bound)
        assert check_messages(messages, bound) is None, bound
        assert messages[-1].tool_call_id == "id-bad4"  # the newest turn is always there
    kept = kept_turns(turns, 10)
    # s1 (now the newest image: 3 messages) + 2 text-only turns: 2 + 3 + 2 * 2 = 9 <= 10
    assert kept[0] is turns[0] and kept[1:] == turns[-2:]
    assert kept_turns(turns, 5) == turns[-1:]


def test_check_messages_rejects_separated_or_mismatched_native_calls():
    call = NativeToolCall("c1", "examine_each_mask", "{}")
    head = [SYSTEM, first()]
    assistant = Message("assistant", ("",), tool_calls=(call,))
    answered = Message("tool", ("ok",), tool_call_id="c1")
    assert check_messages(head + [assistant, answered], 10) is None
    assert "answering call 'c1'" in check_messages(
        head + [assistant, Message("tool", ("ok",), tool_call_id="c2")], 10)
    assert "answering call" in check_messages(head + [assistant, Message.text("user", "x")], 10)
    assert "expected assistant" in check_messages(head + [answered], 10)
    assert "last message" in check_messages(head + [assistant], 10)
    with_image = Message("tool", ("ok", ImagePart(IMG, "x")), tool_call_id="c1")
    assert "tool message with images" in check_messages(head + [assistant, with_image], 10)
    two = Message("assistant", ("",), tool_calls=(call, call))
    assert "2 tool calls" in check_messages(head + [two, answered], 10)


# --- refinements (interface §8c) -----------------------------------------------------------------

def _records():
    from sam3_agent_ros.core.answers import AnswerRecord, SelectedMask

    cup = SelectedMask(0.9, (1.0, 2.0, 3.0, 4.0), 4, (2.0, 3.0))
    return [AnswerRecord("q-1", 'the "left"\ncup', "succeeded", (cup,), ("cup",)),
            AnswerRecord("q-2", "no, the other one", "no_mask", (), ("mug",), refines="q-1")]


def test_a_refinement_states_the_earlier_queries_and_what_they_selected():
    message = context.first_user_message(ImagePart(IMG, "frame"), "not that one", 4, 4, ["bowl"],
                                         earlier=_records())
    text = message.text_content
    assert len(message.images) == 1 and "the frame of the earlier answers" in text
    assert "User query: not that one\n" in text
    # queries JSON-quoted on one line, with their ids; masks as the table (ids, boxes)
    assert 'Earlier answer 1: query "the \\"left\\"\\ncup" (query_id "q-1") selected 1 mask(s):' \
        in text
    assert "1 | 0.900 | 1,2,3,4 | 25.00 | 2,3" in text
    assert 'Earlier answer 2: query "no, the other one" (query_id "q-2") found no mask.' in text
    assert 'Its text_prompts: "cup".' in text and "you may use them again" in text
    # the replaced prompts of this query still come last, and only they are forbidden
    assert text.index(context.EARLIER_HEADER) < text.index('Note: these text_prompts') \
        and text.endswith('"bowl". Do not use any of them again.')


def test_the_earlier_overlay_is_a_first_turn_that_the_first_segment_prunes():
    earlier = context.earlier_answer_turn(_records()[0], ImagePart(IMG, "earlier-overlay"))
    assert not earlier.executed_segment and earlier.assistant.role == "assistant"
    first_refinement = first()
    before = build_messages(SYSTEM, first_refinement, [earlier, turn("bad", image=False)], 10)
    assert [p.key for p in before[3].images] == ["earlier-overlay"]
    assert check_messages(before, 10) is None and context.count_images(before) == 2
    after = build_messages(SYSTEM, first_refinement, [earlier, turn("s1", True), turn("e1")], 10)
    assert "earlier-overlay" not in [p.key for m in after for p in m.images]
    assert check_messages(after, 10) is None and context.count_images(after) == 2
    # within the smallest bound, the earlier turn goes first
    tight = build_messages(SYSTEM, first_refinement, [earlier, turn("bad", image=False)], 4)
    assert len(tight) == 4 and check_messages(tight, 4) is None
    assert "earlier-overlay" not in [p.key for m in tight for p in m.images]

"""The SAM 3 agent loop: ask the model, run its tool, repeat, within bounds.

``Agent.run`` never raises: every query ends in exactly one ``Result``. Errors caused by the model
go back to it as a corrective turn (a ``Mistake`` value); errors of the system end the query.

With an ``AnswerStore`` the agent keeps its answers, and a query with ``refines`` (interface §8c)
is answered on the frame of the answer it names, which the model is shown (``context.py``); an
id the store does not hold ends the query ``failed`` with the store's reason.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable, Sequence

import numpy as np

from sam3_agent_ros import render
from sam3_agent_ros.config import Config
from sam3_agent_ros.core import context, protocol
from sam3_agent_ros.core.answers import AnswerStore, KeptAnswer, RefineUnavailable
from sam3_agent_ros.core.cancel import CancelToken
from sam3_agent_ros.core.errors import LlmError, Mistake, QueryEnded, SegmenterError
from sam3_agent_ros.core.ports import LlmClient, Segmenter
from sam3_agent_ros.core.prompts import Prompts, load_prompts
from sam3_agent_ros.core.tools import Continue, Examiner, Finish, QueryState, ToolBox
from sam3_agent_ros.core.types import (
    Frame,
    LlmReply,
    Mask,
    Message,
    Phase,
    Query,
    QueryStatus,
    Result,
    StatusEvent,
    Timings,
    Usage,
)
from sam3_agent_ros.core.untrusted_text import clip, for_log
from sam3_agent_ros.core.verifier import CallBudget, Verifier
from sam3_agent_ros.core.view import LlmView

log = logging.getLogger(__name__)
REFUSED_REPLY_CHARS = 4000  # the most of a refused reply's text kept in the conversation
StatusCallback = Callable[[StatusEvent], None]
_query_serial = itertools.count(1)
_NO_FRAME = Frame(np.zeros((0, 0, 3), np.uint8))  # the tools' frame when the inputs are bad


class Agent:
    def __init__(self, config: Config, llm: LlmClient, segmenter: Segmenter,
                 prompts: Prompts | None = None, answers: AnswerStore | None = None):
        self.config = config
        self.llm = llm
        self.segmenter = segmenter
        self.prompts = prompts or load_prompts(config.agent.prompts_dir)
        self.backends = config.backends  # named in every result and status (interface §6)
        self.answers = answers  # None: nothing kept, a refinement fails

    def run(self, frame: Frame | None, query: Query, cancel: CancelToken | None = None,
            on_status: StatusCallback | None = None) -> Result:
        """Answer ``query`` on ``frame``; a refinement (``query.refines``) on the frame of the
        answer it refines (``frame`` is not used: None will do)."""
        refined = refusal = None
        if query.refines is not None:
            try:
                refined = self._find(query.refines)
                frame = refined.frame
            except RefineUnavailable as exc:
                refusal, frame = str(exc), None
        result = _QueryRun(self, frame, query, cancel or CancelToken(), on_status, refined,
                           refusal).execute()
        if self.answers is not None:
            self.answers.remember(result, refined)
        return result

    def _find(self, query_id: str) -> KeptAnswer:
        if self.answers is None:
            raise RefineUnavailable("cannot refine: this agent keeps no answers")
        return self.answers.find(query_id)


class _QueryRun:
    """The state of one query; ``execute`` is the loop."""

    def __init__(self, agent: Agent, frame: Frame | None, query: Query, cancel: CancelToken,
                 on_status: StatusCallback | None, refined: KeptAnswer | None = None,
                 refusal: str | None = None):
        self.cfg = agent.config.agent
        self.agent, self.frame, self.query = agent, frame, query
        self.refined, self.refusal = refined, refusal  # refinements: the answer, or why none
        self.started = time.monotonic()
        self.parent_cancel = cancel
        self.cancel = cancel.child(self.started + self.cfg.query_timeout_s)
        self.on_status = on_status
        # The tools see the frame only after _check_inputs (LlmView is lazy: nothing touches the
        # image before); a query that ends before any tool runs gives them an empty one.
        tool_frame = frame if isinstance(frame, Frame) else _NO_FRAME
        view = LlmView(tool_frame.image, self.cfg.max_image_side)
        self.state = QueryState(tool_frame, view, query.text,
                                key_prefix=f"q{next(_query_serial)}")
        self.turns: list[context.Turn] = []
        self.native = agent.config.llm.protocol == "tools"
        self.system_prompt = agent.prompts.system_for(agent.config.llm.protocol)
        self.reasoning: str | None = None  # of the current round, for the status stream
        self.rounds = self.examine_rounds = self.mistakes = 0
        self.timings, self.usage = Timings(), Usage()
        self.usage_lock = threading.Lock()
        self.last_messages: list[Message] = []
        verifier = Verifier(agent.llm, agent.prompts.verifier, self.cfg.examine_concurrency,
                            self.cfg.verifier_retries, CallBudget(self.cfg.max_verifier_calls))
        self.tools = ToolBox(agent.segmenter, self._examiner(verifier), self.cfg.max_masks_in_table,
                             self.cfg.max_text_prompt_chars)

    def execute(self) -> Result:
        try:
            if self.refusal is not None:
                raise QueryEnded(QueryStatus.FAILED, self.refusal)
            frame = _check_inputs(self.frame, self.query)
            if self.refined is not None and self.refined.masks:
                self.turns.append(self._earlier_answer_turn(self.refined))
            while True:
                self._check_limits()
                messages = self._next_request(frame)
                reply = self._ask(messages)
                outcome = self._act(reply)
                if isinstance(outcome, Finish):
                    return self._result(outcome.status, None, outcome.masks)
        except QueryEnded as ended:
            return self._result(ended.status, ended.reason)
        except Exception as exc:  # a bug must still end the query with one result
            log.exception("query %s: internal error", for_log(self.query.id))
            return self._result(QueryStatus.FAILED, f"internal error: {type(exc).__name__}: {exc}")
        finally:
            self.parent_cancel.release(self.cancel)
            # The examiner closure in the tools refers back to this run: without this, the run
            # (frame, views, masks) would wait for the next full garbage collection.
            del self.tools

    def _check_limits(self, llm_error: LlmError | None = None) -> None:
        """``llm_error``: the LLM call that just failed; when the query's time ran out while
        waiting for it, the reason says so and what it waited for (a hung endpoint is named)."""
        if self.cancel.cancelled:
            raise QueryEnded(QueryStatus.CANCELLED, self.cancel.reason or "cancelled")
        remaining = self.cancel.remaining()
        if remaining is not None and remaining <= 0:
            reason = f"query timed out after {self.cfg.query_timeout_s:g} s"
            if llm_error is not None and llm_error.kind not in (LlmError.DEADLINE,
                                                                LlmError.CANCELLED):
                reason += f" waiting for the LLM: {llm_error}"
            raise QueryEnded(QueryStatus.FAILED, reason)
        if self.rounds >= self.cfg.max_rounds:
            raise QueryEnded(QueryStatus.FAILED,
                             f"no answer after agent.max_rounds={self.cfg.max_rounds} rounds")

    def _earlier_answer_turn(self, refined: KeptAnswer) -> context.Turn:
        """The refined answer's overlay at the LLM's size, numbered like its ``~/labels``."""
        view = self.state.view
        overlay = render.overlay_masks(view.image, [view.mask(m) for m in refined.masks])
        view.keep_only([])  # drawn once: its resized masks are not kept
        return context.earlier_answer_turn(refined.record,
                                           self.state.image("earlier-overlay", overlay))

    def _next_request(self, frame: Frame) -> list[Message]:
        first_user = context.first_user_message(
            self.state.image("frame", self.state.view.image), self.query.text, frame.width,
            frame.height, replaced_prompts=self.state.prompts[:-1],
            earlier=self.refined.chain if self.refined is not None else (),
            table_limit=self.cfg.max_masks_in_table)
        messages = context.build_messages(Message.text("system", self.system_prompt),
                                          first_user, self.turns, self.cfg.max_context_messages)
        violation = context.check_messages(messages, self.cfg.max_context_messages)
        if violation:
            raise QueryEnded(QueryStatus.FAILED, f"context invariant violated: {violation}")
        self.last_messages = messages
        return messages

    def _ask(self, messages: list[Message]) -> LlmReply:
        self.rounds += 1
        self._status(Phase.THINKING)
        started = time.monotonic()
        try:
            if self.native:
                reply = self.agent.llm.complete(messages, self.cancel,
                                                tools=protocol.TOOL_FUNCTIONS)
            else:
                reply = self.agent.llm.complete(messages, self.cancel)
        except LlmError as exc:
            self._check_limits(exc)  # a cancel or the deadline explains the error best
            raise QueryEnded(QueryStatus.FAILED, f"LLM request failed: {exc}") from None
        finally:
            self.timings.llm_s += time.monotonic() - started
        self._add_usage(reply)
        return reply

    def _act(self, reply: LlmReply) -> Finish | None:
        """Run the reply's call; a mistake (in the reply or in the call) gets a corrective turn."""
        parsed = protocol.interpret(reply, native=self.native)
        self.reasoning = protocol.clip_reasoning(parsed.reasoning, self.cfg.status_reasoning_chars)
        wanted = parsed.outcome
        outcome = wanted if isinstance(wanted, Mistake) else self._run_tool(wanted)
        calls = (parsed.native_call,) if parsed.native_call else ()
        note = protocol.ignored_calls_note(parsed.ignored_calls) if parsed.ignored_calls else None
        if isinstance(outcome, Mistake):
            self._count_mistake(outcome)
            # A refused reply goes back to the model cut short: a megabyte text_prompt is not
            # re-sent with every following request.
            refused = Message("assistant", (clip(parsed.kept_text, REFUSED_REPLY_CHARS),),
                              tool_calls=calls)
            correction = Message.text("user", f"Error: {outcome.text}")
            self.turns.append(context.Turn(refused, _with_note(correction, note)))
            return None
        self.mistakes = 0
        if isinstance(outcome, Finish):
            return outcome
        assistant = Message("assistant", (parsed.kept_text,), tool_calls=calls)
        self.turns.append(context.Turn(assistant, _with_note(outcome.message, note),
                                       outcome.executed_segment))
        return None

    def _run_tool(self, call: protocol.ToolCall) -> Continue | Finish | Mistake:
        refused = self.tools.check(call, self.state)  # refused before any status shows it
        if refused is not None:
            return refused
        if call.name in _PHASES:
            self._status(_PHASES[call.name], call)
        try:
            return self.tools.execute(call, self.state)
        except SegmenterError as exc:
            raise QueryEnded(QueryStatus.FAILED, str(exc)) from None

    def _count_mistake(self, mistake: Mistake) -> None:
        self.mistakes += 1
        if self.mistakes >= self.cfg.max_consecutive_mistakes:
            raise QueryEnded(QueryStatus.FAILED, f"{self.mistakes} invalid model replies in a "
                                                 f"row; last: {mistake.text}")

    def _examiner(self, verifier: Verifier) -> Examiner:
        def examine(state: QueryState) -> list[bool]:
            self.examine_rounds += 1
            started = time.monotonic()
            try:
                return verifier.examine(state, self.cancel, self.examine_rounds, self._add_usage)
            except LlmError as exc:
                self._check_limits(exc)
                raise QueryEnded(QueryStatus.FAILED, f"verifier request failed: {exc}") from None
            finally:
                self.timings.llm_s += time.monotonic() - started
        return examine

    def _add_usage(self, reply: LlmReply) -> None:
        with self.usage_lock:
            self.usage.add(reply)

    def _status(self, phase: Phase, call: protocol.ToolCall | None = None,
                status: QueryStatus | None = None) -> None:
        if self.on_status is None:
            return
        event = StatusEvent(
            query_id=self.query.id, phase=phase, round=self.rounds,
            tool=call.name if call else None,
            text_prompt=call.parameters.get("text_prompt") if call else None,
            num_masks=len(self.state.masks), context_messages=len(self.last_messages),
            context_images=context.count_images(self.last_messages),
            elapsed_s=time.monotonic() - self.started,
            status=status.value if status else None,
            reasoning=None if phase is Phase.THINKING else self.reasoning,
            backends=self.agent.backends, refines=self.query.refines)
        try:
            self.on_status(event)
        except Exception:  # a broken observer must not break the query
            log.exception("status callback failed")

    def _result(self, status: QueryStatus, error: str | None,
                masks: Sequence[Mask] = ()) -> Result:
        self.timings.total_s = time.monotonic() - self.started
        self.timings.segment_s = self.state.segment_s
        result = Result(query_id=self.query.id, query=self.query.text, status=status, error=error,
                        masks=list(masks), text_prompts=list(self.state.prompts),
                        rounds=self.rounds, timings=self.timings, usage=self.usage,
                        frame=self.frame if isinstance(self.frame, Frame) else None,
                        refines=self.query.refines, backends=self.agent.backends,
                        candidates=list(self.state.prompt_masks) if masks else [])
        if self.state.untrained_weights:
            result.extra["untrained_weights"] = True
        self._status(Phase.DONE, status=status)
        return result


_PHASES = {protocol.SEGMENT: Phase.SEGMENTING, protocol.EXAMINE: Phase.EXAMINING}


def _with_note(message: Message, note: str | None) -> Message:
    """``message`` with ``note`` (e.g. about ignored extra calls) as its first text."""
    return message if note is None else Message(message.role, (note, *message.content))


def _check_inputs(frame: Frame | None, query: Query) -> Frame:
    """The query's frame, checked: bad input ends the query before any model call."""
    if not isinstance(frame, Frame) or not isinstance(frame.image, np.ndarray):
        raise QueryEnded(QueryStatus.FAILED, "no frame image")
    image = frame.image
    if image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8:
        raise QueryEnded(QueryStatus.FAILED,
                         f"frame must be RGB uint8 (H, W, 3), got {image.dtype} {image.shape}")
    if image.shape[0] == 0 or image.shape[1] == 0:
        raise QueryEnded(QueryStatus.FAILED, f"frame is empty ({image.shape[1]}x{image.shape[0]})")
    if not isinstance(query.text, str) or not query.text.strip():
        raise QueryEnded(QueryStatus.FAILED, "query text is empty")
    return frame

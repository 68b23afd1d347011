"""examine_each_mask: one isolated verifier conversation per mask, run concurrently.

Each conversation is [verifier system prompt, one user message with three images: the raw frame,
the frame with only this mask drawn, a zoomed crop]. Nothing of it enters the main context: the
caller only gets one verdict per mask. A reply without a verdict is retried a bounded number of
times, then the mask is rejected. Endpoint failures (``LlmError``) propagate: they end the query,
and the examine's other calls still in flight are cancelled at once (their own child token), so
their connections close and the server stops generating for them (interface §14).

Every call, retries included, is taken from the query's ``CallBudget`` (agent.max_verifier_calls):
an examine that needs more calls than are left does not start, and a budget spent by retries
ends the query; both raise ``QueryEnded`` (failed) with the reason.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait

from sam3_agent_ros import render
from sam3_agent_ros.core.cancel import CancelToken
from sam3_agent_ros.core.errors import LlmError, QueryEnded
from sam3_agent_ros.core.ports import LlmClient
from sam3_agent_ros.core.protocol import parse_verdict
from sam3_agent_ros.core.tools import QueryState
from sam3_agent_ros.core.types import LlmReply, Mask, Message, QueryStatus

log = logging.getLogger(__name__)
UNBOUNDED = 2**62  # a Verifier built without a budget (benchmarks); the agent always gives one


def verifier_request(system_prompt: str, state: QueryState, index: int, mask: Mask,
                     examine_round: int) -> list[Message]:
    """The isolated conversation that asks whether mask ``index`` (0-based) answers the query."""
    key = f"examine-{examine_round}-mask-{index + 1}"
    text = (f"User query: {state.query_text}\n"
            "Image 1: the full camera frame. Image 2: the same frame with one candidate mask "
            "highlighted. Image 3: a zoomed crop around that mask.\n"
            "Does the highlighted mask cover exactly one object that the query refers to "
            "(or a correct part of the answer)? End with <verdict>Accept</verdict> or "
            "<verdict>Reject</verdict>.")
    view = state.view
    content = (state.image("frame", view.image),
               state.image(f"{key}-overlay", render.single_mask_overlay(view.image,
                                                                        view.mask(mask))),
               state.image(f"{key}-crop", render.zoom_crop(state.frame.image, mask.mask)),
               text)
    return [Message.text("system", system_prompt), Message("user", content)]


class CallBudget:
    """The verifier calls one query may still make (``agent.max_verifier_calls``); thread-safe."""

    def __init__(self, total: int):
        self.total = total
        self._used = 0
        self._lock = threading.Lock()

    @property
    def used(self) -> int:
        return self._used

    @property
    def left(self) -> int:
        return self.total - self._used

    def take(self) -> None:
        """Count one call, or raise ``QueryEnded`` (failed) when none is left."""
        with self._lock:
            if self._used >= self.total:
                raise QueryEnded(QueryStatus.FAILED, self.spent_reason())
            self._used += 1

    def spent_reason(self, needed: int | None = None) -> str:
        if needed is None:
            return (f"verifier budget spent: all agent.max_verifier_calls={self.total} verifier "
                    "calls of this query were made (retries included)")
        return (f"verifier budget spent: examine_each_mask on {needed} mask(s) needs at least "
                f"{needed} verifier calls, {self.left} of agent.max_verifier_calls={self.total} "
                "are left")


class Verifier:
    def __init__(self, llm: LlmClient, system_prompt: str, concurrency: int, retries: int,
                 budget: CallBudget | None = None):
        self._llm = llm
        self._system_prompt = system_prompt
        self._concurrency = concurrency
        self._retries = retries
        self.budget = budget if budget is not None else CallBudget(UNBOUNDED)

    def examine(self, state: QueryState, cancel: CancelToken, examine_round: int,
                on_reply: Callable[[LlmReply], None]) -> list[bool]:
        """One verdict per current mask, in mask order. Raises LlmError if the endpoint fails,
        QueryEnded when the call budget does not cover the masks or runs out."""
        if len(state.masks) > self.budget.left:  # no call at all: it could not finish
            raise QueryEnded(QueryStatus.FAILED, self.budget.spent_reason(len(state.masks)))

        def verify(index: int) -> bool:
            messages = verifier_request(self._system_prompt, state, index, state.masks[index],
                                        examine_round)
            for attempt in range(self._retries + 1):
                if cancel.cancelled:
                    raise LlmError("cancelled")
                self.budget.take()
                reply = self._llm.complete(messages, cancel)
                on_reply(reply)
                verdict = parse_verdict(reply.text)
                if verdict is not None:
                    return verdict
                log.info("verifier reply for mask %d had no verdict (attempt %d)", index + 1,
                         attempt + 1)
            return False

        workers = max(1, min(self._concurrency, len(state.masks)))
        query_cancel, cancel = cancel, cancel.child(cancel.deadline)
        try:
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="verifier") as pool:
                futures = [pool.submit(verify, i) for i in range(len(state.masks))]
                try:
                    wait(futures, return_when=FIRST_EXCEPTION)
                    failed = [f for f in futures
                              if f.done() and not f.cancelled() and f.exception() is not None]
                    if failed:  # the first failure: cut the calls in flight, start no more
                        cancel.cancel("examine_each_mask stopped by a failed call")
                        raise failed[0].exception()  # type: ignore[misc]
                    return [f.result() for f in futures]
                finally:
                    for future in futures:
                        future.cancel()
        finally:
            query_cancel.release(cancel)

"""examine_each_mask: one isolated verifier conversation per mask, run concurrently.

Each conversation is [verifier system prompt, one user message with three images: the raw frame,
the frame with only this mask drawn, a zoomed crop]. Nothing of it enters the main context: the
caller only gets one verdict per mask. A reply without a verdict is retried a bounded number of
times, then the mask is rejected. Endpoint failures (``LlmError``) propagate: they end the query.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from sam3_agent_ros import render
from sam3_agent_ros.core.cancel import CancelToken
from sam3_agent_ros.core.errors import LlmError
from sam3_agent_ros.core.ports import LlmClient
from sam3_agent_ros.core.protocol import parse_verdict
from sam3_agent_ros.core.tools import QueryState
from sam3_agent_ros.core.types import LlmReply, Mask, Message

log = logging.getLogger(__name__)


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


class Verifier:
    def __init__(self, llm: LlmClient, system_prompt: str, concurrency: int, retries: int):
        self._llm = llm
        self._system_prompt = system_prompt
        self._concurrency = concurrency
        self._retries = retries

    def examine(self, state: QueryState, cancel: CancelToken, examine_round: int,
                on_reply: Callable[[LlmReply], None]) -> list[bool]:
        """One verdict per current mask, in mask order. Raises LlmError if the endpoint fails."""
        def verify(index: int) -> bool:
            messages = verifier_request(self._system_prompt, state, index, state.masks[index],
                                        examine_round)
            for attempt in range(self._retries + 1):
                if cancel.cancelled:
                    raise LlmError("cancelled")
                reply = self._llm.complete(messages, cancel)
                on_reply(reply)
                verdict = parse_verdict(reply.text)
                if verdict is not None:
                    return verdict
                log.info("verifier reply for mask %d had no verdict (attempt %d)", index + 1,
                         attempt + 1)
            return False

        workers = max(1, min(self._concurrency, len(state.masks)))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="verifier") as pool:
            futures = [pool.submit(verify, i) for i in range(len(state.masks))]
            try:
                return [f.result() for f in futures]
            finally:
                for future in futures:  # first failure: don't start the remaining calls
                    future.cancel()

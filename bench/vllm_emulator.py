"""An EMULATOR of one vLLM server for bench/fleet.py: the suite's scripted OpenAI-compatible
server (test/fakes/scripted_server.py, real HTTP) answering like a model, with the time each
answer takes computed by a model of vLLM's engine. It is not vLLM and runs no model; its figures
are the consequences of the parameters below, which are calibrated from published figures and
can be recalibrated on a real GPU (docs/fleet.md gives the `vllm bench serve` command).

The engine model (``EngineParams``; defaults for an 8B-class model on one H100 80 GB):
- continuous batching: at most ``max_num_seqs`` sequences running, each engine step decodes one
  token of every running sequence and spends the rest of a ``max_batched_tokens`` budget on
  prefill chunks (chunked prefill, oldest first);
- step time = ``decode_step_s`` + ``decode_s_per_seq`` x running sequences + ``prefill_s_per_token``
  x prefill tokens in the step (decode reads the weights once per step and each sequence's KV;
  prefill is compute-bound);
- KV cache of ``kv_cache_tokens`` in blocks of ``block_size`` tokens; a request is admitted when
  its prompt and output blocks fit (head-of-line, no preemption);
- prefix cache (``prefix_cache``): full blocks are keyed by a hash chained over the prefix (as
  vLLM does: the block's tokens, the hash of the block before, the image's hash for image tokens,
  the request's ``cache_salt``); a new request skips the prefill of its leading cached blocks;
  blocks of finished requests stay cached until the space is needed (LRU);
- waiting queue ordered by the request's ``priority`` (lower first), then arrival, when
  ``priority`` is on (``--scheduling-policy priority``); arrival order otherwise.
- tokens: a text part counts one token per ``chars_per_token`` characters; an image counts one
  token per 28 x 28 px (Qwen2.5-VL's merged patches) of the image as sent, or of
  ``image_tokens_side`` when given (the robots may send small images to keep their CPU cost
  down while the server counts a full frame's tokens: the prefix identity of an image is the
  hash of its bytes either way).

Time may run scaled (``speed``: virtual seconds per wall second) so that minutes of fleet fit in
seconds of the benchmark; every time the emulator reports is virtual (engine) time.

Answers: the model's policy is the agent's shortest road: round 1 ``segment_phrase``, round 2
``examine_each_mask``, then ``select_masks_and_return [1]``; verifier calls answer Accept. Each
answer "generates" ``main_output_tokens`` / ``verifier_output_tokens`` tokens.
"""

from __future__ import annotations

import collections
import hashlib
import heapq
import itertools
import json
import math
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from sam3_agent_ros.image_header import encoded_size
from test.fakes.scripted_server import (
    Reply,
    ScriptedServer,
    is_verifier_request,
    message_parts,
    tool_call,
    verdict,
)

IMAGE_PATCH_PX = 28


@dataclass(frozen=True)
class EngineParams:
    max_num_seqs: int = 256
    max_batched_tokens: int = 8192
    kv_cache_tokens: int = 400_000
    block_size: int = 16
    prefill_s_per_token: float = 50e-6
    decode_step_s: float = 7.0e-3
    decode_s_per_seq: float = 0.1e-3
    prefix_cache: bool = True
    priority: bool = True
    chars_per_token: float = 4.0
    image_tokens_side: int = 0  # 0: count the image as sent
    main_output_tokens: int = 180
    verifier_output_tokens: int = 90
    speed: float = 1.0


@dataclass
class EmulatedRequest:
    id: int
    priority: int
    kind: str
    blocks: list[int]
    prompt_tokens: int
    output_tokens: int
    arrival_v: float
    user: str = ""  # the body's "user" field (bench/fleet.py: which robot)
    cached_tokens: int = 0
    prefilled: int = 0
    produced: int = 0
    first_token_v: float | None = None
    done_v: float | None = None
    held_blocks: list[int] = field(default_factory=list)
    done: threading.Event = field(default_factory=threading.Event)

    @property
    def to_prefill(self) -> int:
        return self.prompt_tokens - self.cached_tokens - self.prefilled


def _digest(value: Any) -> int:
    return int.from_bytes(hashlib.blake2b(repr(value).encode(), digest_size=8).digest(), "big")


def request_segments(body: dict, params: EngineParams) -> list[tuple[int, int]]:
    """The prompt as (content hash, tokens) segments in the order the chat template renders it."""
    segments: list[tuple[int, int]] = []
    if body.get("tools"):
        text = json.dumps(body["tools"], sort_keys=True)
        segments.append((_digest(text), max(1, math.ceil(len(text) / params.chars_per_token))))
    for message in body.get("messages", []):
        segments.append((_digest(("role", message.get("role"))), 4))
        for part in message_parts(message):
            if part.get("type") == "image_url":
                url = part["image_url"]["url"]
                segments.append((_digest(url), image_tokens(url, params)))
            elif part.get("type") == "text":
                text = part.get("text", "")
                segments.append((_digest(text),
                                 max(1, math.ceil(len(text) / params.chars_per_token))))
    return segments


def image_tokens(url: str, params: EngineParams) -> int:
    import base64

    data = base64.b64decode(url.partition(",")[2][:8192])  # the size is in the first bytes
    _, width, height = encoded_size(data)
    if params.image_tokens_side:
        scale = params.image_tokens_side / max(width, height)
        width, height = round(width * scale), round(height * scale)
    return math.ceil(width / IMAGE_PATCH_PX) * math.ceil(height / IMAGE_PATCH_PX)


def block_hashes(segments: list[tuple[int, int]], block_size: int, salt: str | None
                 ) -> tuple[list[int], int]:
    """The chained hashes of the prompt's full blocks, and its token count."""
    hashes: list[int] = []
    previous = _digest(("salt", salt))
    pieces: list[tuple[int, int, int]] = []
    filled = 0
    total = 0
    for content, tokens in segments:
        start = 0
        while start < tokens:
            take = min(tokens - start, block_size - filled)
            pieces.append((content, start, start + take))
            start += take
            filled += take
            if filled == block_size:
                previous = _digest((previous, tuple(pieces)))
                hashes.append(previous)
                pieces, filled = [], 0
        total += tokens
    return hashes, total


class Engine:
    """The scheduler (one thread) in virtual time; ``submit`` blocks until the answer is ready."""

    def __init__(self, params: EngineParams):
        self.p = params
        self._t0 = time.monotonic()
        self.clock = 0.0
        self._lock = threading.Condition()
        self._waiting: list[tuple[Any, ...]] = []
        self._running: list[EmulatedRequest] = []
        self._ids = itertools.count()
        self._refs: dict[int, int] = {}  # block hash -> running requests holding it
        self._lru: collections.OrderedDict[int, None] = collections.OrderedDict()  # free cached
        self._capacity = params.kv_cache_tokens // params.block_size
        self.finished: list[EmulatedRequest] = []
        self._answered: list[EmulatedRequest] = []  # done in engine time, told at that wall time
        self._stop = False
        self._thread = threading.Thread(target=self._loop, name="vllm-emulator", daemon=True)
        self._thread.start()

    def now(self) -> float:
        return (time.monotonic() - self._t0) * self.p.speed

    def stop(self) -> None:
        with self._lock:
            self._stop = True
            self._lock.notify_all()
        self._thread.join(2.0)
        for item in self._waiting:
            item[-1].done.set()
        for request in [*self._running, *self._answered]:
            request.done.set()

    def submit(self, body: dict, kind: str, output_tokens: int) -> EmulatedRequest:
        salt = body.get("cache_salt") if isinstance(body.get("cache_salt"), str) else None
        blocks, prompt_tokens = block_hashes(request_segments(body, self.p), self.p.block_size,
                                             salt)
        priority = int(body.get("priority", 0) or 0)
        with self._lock:
            request = EmulatedRequest(next(self._ids), priority, kind, blocks, prompt_tokens,
                                      output_tokens, max(self.now(), self.clock),
                                      str(body.get("user", "")))
            if not self.p.prefix_cache:
                request.blocks = [_digest((request.id, i)) for i in range(len(blocks))]
            key = (priority if self.p.priority else 0, request.arrival_v, request.id)
            heapq.heappush(self._waiting, (*key, request))
            self._lock.notify_all()
        request.done.wait()
        return request

    # --- the engine ---------------------------------------------------------------------------

    def _used(self) -> int:
        return len(self._refs) + len(self._lru)

    def _admit(self) -> None:
        later = []  # arrived during the step that just ran: they join at the next one
        while self._waiting and self._waiting[0][-1].arrival_v > self.clock:
            later.append(heapq.heappop(self._waiting))
        try:
            self._admit_arrived()
        finally:
            for item in later:
                heapq.heappush(self._waiting, item)

    def _admit_arrived(self) -> None:
        while (self._waiting and len(self._running) < self.p.max_num_seqs
               and self._waiting[0][-1].arrival_v <= self.clock):
            request = self._waiting[0][-1]
            cached = 0
            for block in request.blocks:
                if block in self._refs or block in self._lru:
                    cached += 1
                else:
                    break
            # the partial last block and the output's blocks: the request's own
            extra = math.ceil((request.prompt_tokens - len(request.blocks) * self.p.block_size
                               + request.output_tokens) / self.p.block_size)
            held_after = (len(self._refs) + extra
                          + sum(1 for b in request.blocks if b not in self._refs))
            if held_after > self._capacity:
                return  # the head of the queue waits for space (free cached blocks are evicted)
            heapq.heappop(self._waiting)
            for block in request.blocks:
                if block in self._lru:
                    del self._lru[block]
                self._refs[block] = self._refs.get(block, 0) + 1
            while self._used() + extra > self._capacity and self._lru:
                self._lru.popitem(last=False)
            request.held_blocks = [_digest(("private", request.id, i)) for i in range(extra)]
            for block in request.held_blocks:
                self._refs[block] = 1
            request.cached_tokens = min(cached * self.p.block_size, request.prompt_tokens - 1)
            self._running.append(request)

    def _release(self, request: EmulatedRequest) -> None:
        for block in request.held_blocks:
            del self._refs[block]
        for block in request.blocks:
            self._refs[block] -= 1
            if self._refs[block] == 0:
                del self._refs[block]
                if self.p.prefix_cache:
                    self._lru[block] = None

    def _step(self) -> float:
        """One engine step's duration; applies its effects at the step's end."""
        budget = self.p.max_batched_tokens
        decoding = [r for r in self._running if r.to_prefill == 0]
        budget -= len(decoding)
        prefill = 0
        chunks: list[tuple[EmulatedRequest, int]] = []
        for request in self._running:
            if request.to_prefill > 0 and budget > 0:
                take = min(request.to_prefill, budget)
                chunks.append((request, take))
                budget -= take
                prefill += take
        duration = (self.p.decode_step_s + self.p.decode_s_per_seq * len(self._running)
                    + self.p.prefill_s_per_token * prefill)
        end = self.clock + duration
        for request, take in chunks:
            request.prefilled += take
            if request.to_prefill == 0:  # the step that ends the prefill makes token 1
                request.produced = 1
                request.first_token_v = end
        for request in decoding:
            request.produced += 1
        self.clock = end
        for request in [r for r in self._running if r.produced >= r.output_tokens]:
            request.done_v = end
            self._running.remove(request)
            self._release(request)
            self.finished.append(request)
            self._answered.append(request)
        return duration

    def _loop(self) -> None:
        with self._lock:
            while not self._stop:
                now = self.now()
                if not self._running and not self._waiting and not self._answered:
                    self.clock = max(self.clock, now)
                    self._lock.wait(0.005)
                    continue
                if self.clock > now:  # the step runs until the wall reaches its end
                    self._lock.wait((self.clock - now) / self.p.speed)
                    continue
                for request in self._answered:  # their step has ended: answer them now
                    request.done.set()
                self._answered = []
                if not self._running:  # an idle engine starts its next step at the present
                    self.clock = max(self.clock, now)
                self._admit()
                if not self._running:
                    self.clock = max(self.clock, now)
                    self._lock.wait(0.005)
                    continue
                self._step()


class VllmEmulator:
    """The HTTP face: a ``ScriptedServer`` whose responder waits for the engine's answer."""

    def __init__(self, params: EngineParams):
        self.params = params
        self.engine = Engine(params)
        self.server = ScriptedServer(responder=self._respond, classify=is_verifier_request)

    def __enter__(self) -> VllmEmulator:
        self.server.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.engine.stop()
        self.server.stop()

    @property
    def base_url(self) -> str:
        return self.server.base_url

    def _respond(self, body: dict) -> Reply:
        if is_verifier_request(body):
            step: Reply = verdict(True)
            tokens = self.params.verifier_output_tokens
            kind = "verifier"
        else:
            rounds = sum(1 for m in body.get("messages", []) if m.get("role") == "assistant")
            step = (tool_call("segment_phrase", text_prompt="object") if rounds == 0 else
                    tool_call("examine_each_mask") if rounds == 1 else
                    tool_call("select_masks_and_return", final_answer_masks=[1]))
            tokens = self.params.main_output_tokens
            kind = "main"
        request = self.engine.submit(body, kind, tokens)
        return Reply(text=step.text, prompt_tokens=request.prompt_tokens,
                     completion_tokens=request.output_tokens)

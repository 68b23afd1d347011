"""Size of every main-loop request over a 20-round conversation: ours (pruned) vs no pruning.

The conversation (1920x1080 frame, 6 masks per phrase, the verifier accepts every mask) repeats
a 4-round cycle that leaves something to prune each time: a new phrase, examine_each_mask, a select
with a non-existent id (corrected), a reply without a tool call (corrected); rounds 17-20 are a new
phrase, examine, a bad select and the final ``select_masks_and_return [1]``:

    segment "object 0", examine, select [99], no tool, segment "object 1", examine, ...,
    segment "object 4", examine, select [99], select [1]

Size = bytes of the JSON request body as the openai client sends it (model + messages, images as
base64 JPEG data URLs downscaled to agent.max_image_side, what ``OpenAiClient`` produces).

- ours: the requests ``Agent`` actually built (recorded by the scripted LLM).
- no pruning: the same loop keeping everything: request k = system, first user message, and every
  turn 1..k-1 complete with its image (turn j is taken from our request j+1, whose last two
  messages are that turn as it happened).

Run alone: ``.venv/bin/python bench/context_size.py``.
"""

from __future__ import annotations

import json
import sys

import numpy as np
from common import bench_frame, blob_masks, command_line, write_result

from sam3_agent_ros.config import Config  # noqa: E402  (after common puts ROOT on sys.path)
from sam3_agent_ros.core.agent import Agent  # noqa: E402
from sam3_agent_ros.core.ports import Detections  # noqa: E402
from sam3_agent_ros.core.types import Frame, Message, Query, QueryStatus  # noqa: E402
from sam3_agent_ros.llm.encoding import ImageEncoder, to_openai_messages  # noqa: E402
from test.fakes.scripted_llm import ScriptedLlm, examine, segment, select  # noqa: E402

WIDTH, HEIGHT = 1920, 1080
ROUNDS = 20
N_MASKS = 6


class PhraseSegmenter:
    """Six elliptical masks per phrase (different per phrase), precomputed."""

    def __init__(self):
        self._cache: dict[str, tuple] = {}

    def segment(self, image, text_prompt):
        if text_prompt not in self._cache:
            seed = sum(map(ord, text_prompt))
            masks, scores, boxes = blob_masks(WIDTH, HEIGHT, N_MASKS, seed=seed)
            self._cache[text_prompt] = Detections(masks, scores, boxes)
        return self._cache[text_prompt]


def conversation() -> list[str]:
    replies: list[str] = []
    for k in range(4):
        replies += [segment(f"object {k}"), examine(), select(99),
                    "I think the answer is the first object."]
    replies += [segment("object 4"), examine(), select(99), select(1)]
    assert len(replies) == ROUNDS
    return replies


def request_size(messages: list[Message], encoder: ImageEncoder) -> int:
    body = {"model": "bench-model", "messages": to_openai_messages(messages, encoder),
            "temperature": 0.0, "max_tokens": 2048}
    return len(json.dumps(body))


def images(messages: list[Message]) -> int:
    return sum(len(m.images) for m in messages)


def no_pruning_requests(ours: list[list[Message]]) -> list[list[Message]]:
    turns = [request[-2:] for request in ours[1:]]  # turn j (0-based) as it happened
    head = ours[0][:2]  # system + first user message of round 1
    return [head + [m for turn in turns[:k] for m in turn] for k in range(len(ours))]


def main() -> int:
    config = Config.from_params({"agent.max_rounds": ROUNDS + 5})
    llm = ScriptedLlm(conversation(), verifier=lambda m: "<verdict>Accept</verdict>")
    agent = Agent(config, llm, PhraseSegmenter())
    image = bench_frame(WIDTH, HEIGHT)
    result = agent.run(Frame(image, 1, 0, "camera"), Query("bench", "the first object"))
    if result.status is not QueryStatus.SUCCEEDED or result.rounds != ROUNDS:
        raise RuntimeError(f"the scripted conversation went wrong: {result.status} "
                           f"{result.error} after {result.rounds} rounds")
    encoder = ImageEncoder(config.agent.max_image_side)
    ours = llm.main_requests
    baseline = no_pruning_requests(ours)
    rows = [{"round": k + 1, "ours_bytes": request_size(o, encoder), "ours_images": images(o),
             "ours_messages": len(o), "no_pruning_bytes": request_size(b, encoder),
             "no_pruning_images": images(b), "no_pruning_messages": len(b)}
            for k, (o, b) in enumerate(zip(ours, baseline, strict=True))]
    growth = rows[-1]["ours_bytes"] / rows[2]["ours_bytes"]
    growth_baseline = rows[-1]["no_pruning_bytes"] / rows[2]["no_pruning_bytes"]
    for row in rows:
        print(f"round {row['round']:2d}: ours {row['ours_bytes'] / 1024:7.1f} KiB "
              f"{row['ours_images']} img {row['ours_messages']:2d} msg | no pruning "
              f"{row['no_pruning_bytes'] / 1024:8.1f} KiB {row['no_pruning_images']:2d} img "
              f"{row['no_pruning_messages']:2d} msg")
    print(f"round 20 / round 3: ours {growth:.2f}x, no pruning {growth_baseline:.2f}x")
    write_result("context_size", {"command": command_line(), "width": WIDTH, "height": HEIGHT,
                                  "max_image_side": config.agent.max_image_side,
                                  "max_context_messages": config.agent.max_context_messages,
                                  "rows": rows, "growth_round20_over_round3": round(growth, 3),
                                  "no_pruning_growth_round20_over_round3":
                                      round(growth_baseline, 3),
                                  "mean_image_bytes": int(np.mean([
                                      len(encoder.data_url(p)) for m in ours[-1]
                                      for p in m.images]))})
    return 0


if __name__ == "__main__":
    sys.exit(main())

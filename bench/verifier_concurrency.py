"""Wall time of examine_each_mask on 8 masks against an endpoint that answers in 200 ms.

Real HTTP: the scripted OpenAI-compatible server (test/fakes/scripted_server.py) on 127.0.0.1
answers every verifier request after ``delay_s=0.2``; our real ``OpenAiClient`` sends them from
``Verifier.examine`` (rendering the overlay and the crop, JPEG encoding, JSON, HTTP included)
with agent.examine_concurrency 1 (sequential), 4 and 8 (the default). "One call" is the same
examine on a single mask (one verifier request end to end). Each figure is the median of
``--runs`` runs; every run uses a fresh query (fresh image cache).

Run alone: ``.venv/bin/python bench/verifier_concurrency.py [--runs 3]``.
"""

from __future__ import annotations

import argparse
import sys
import time

from common import RESOLUTIONS, bench_frame, blob_masks, command_line, median, write_result

from sam3_agent_ros.config import Config  # noqa: E402  (after common puts ROOT on sys.path)
from sam3_agent_ros.core.cancel import CancelToken  # noqa: E402
from sam3_agent_ros.core.prompts import load_prompts  # noqa: E402
from sam3_agent_ros.core.tools import QueryState  # noqa: E402
from sam3_agent_ros.core.types import Frame, Mask  # noqa: E402
from sam3_agent_ros.core.verifier import Verifier  # noqa: E402
from sam3_agent_ros.llm.openai_client import OpenAiClient  # noqa: E402
from test.fakes.scripted_server import ScriptedServer, slow, verdict  # noqa: E402

N_MASKS = 8
DELAY_S = 0.2
CONCURRENCIES = (1, 4, 8)


def make_state(image, masks, scores, boxes, count: int, serial: int) -> QueryState:
    """A query's state as ``Agent`` builds it (with the LLM view of the frame when the core has
    one), holding ``count`` current masks."""
    frame, prefix = Frame(image, 1, 0, "camera"), f"bench{serial}"
    if "view" in QueryState.__dataclass_fields__:
        from sam3_agent_ros.core.view import LlmView

        view = LlmView(image, Config.from_params({}).agent.max_image_side)
        state = QueryState(frame, view, "the mugs", key_prefix=prefix)
    else:
        state = QueryState(frame, "the mugs", key_prefix=prefix)
    state.masks = [Mask.from_array(masks[k], scores[k], tuple(boxes[k])) for k in range(count)]
    return state


def examine_once(client, prompt: str, state: QueryState, concurrency: int) -> float:
    verifier = Verifier(client, prompt, concurrency, retries=0)
    started = time.perf_counter()
    verdicts = verifier.examine(state, CancelToken(), 1, lambda reply: None)
    elapsed = time.perf_counter() - started
    if verdicts != [True] * len(state.masks):
        raise RuntimeError(f"unexpected verdicts {verdicts}")
    return elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--resolution", default="1080p", choices=list(RESOLUTIONS))
    args = parser.parse_args(argv)
    width, height = RESOLUTIONS[args.resolution]
    image = bench_frame(width, height)
    masks, scores, boxes = blob_masks(width, height, N_MASKS)
    prompt = load_prompts(Config.from_params({}).agent.prompts_dir).verifier
    serial = iter(range(10**6))
    with ScriptedServer(verifier=lambda body: slow(verdict(True), DELAY_S)) as server:
        config = Config.from_params({"llm.backend": "openai", "llm.base_url": server.base_url})
        client = OpenAiClient(config.llm, config.agent.max_image_side)
        try:
            examine_once(client, prompt, make_state(image, masks, scores, boxes, 1, 0), 1)
            one = median([examine_once(client, prompt, make_state(
                image, masks, scores, boxes, 1, next(serial)), 1) for _ in range(args.runs)])
            walls = {c: median([examine_once(client, prompt, make_state(
                image, masks, scores, boxes, N_MASKS, next(serial)), c)
                for _ in range(args.runs)]) for c in CONCURRENCIES}
        finally:
            client.close()
        server.assert_clean(all_consumed=False)
    rows = [{"concurrency": c, "wall_s": round(w, 3), "x_one_call": round(w / one, 2),
             "x_nominal_200ms": round(w / DELAY_S, 2)} for c, w in walls.items()]
    print(f"one verifier call ({args.resolution}): {one * 1000:.0f} ms")
    for row in rows:
        print(f"examine 8 masks, concurrency {row['concurrency']}: {row['wall_s'] * 1000:.0f} ms "
              f"= {row['x_one_call']:.2f}x one call")
    write_result("verifier_concurrency", {
        "command": command_line(), "resolution": args.resolution, "masks": N_MASKS,
        "delay_s": DELAY_S, "runs": args.runs, "one_call_s": round(one, 3), "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())

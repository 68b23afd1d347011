"""Rounds per query on the reply-shape corpus (test/fakes/reply_shapes.py), both protocols.

Each query "the leftmost blue object" starts with one reply of the shape under test; every later
request is answered by a well-behaved model (segment "blue object" until masks exist, then select
mask 1), decided from what the agent actually sent, so the same script measures any version of
the agent. A query is correct when it succeeded with exactly that prompt and mask.

    .venv/bin/python bench/reply_shapes.py            # prints the table, writes build/bench/
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # first: ahead of the standard library's own `test` package

import numpy as np  # noqa: E402

from sam3_agent_ros.config import PARAMETERS_BY_NAME, Config  # noqa: E402
from sam3_agent_ros.core.agent import Agent  # noqa: E402
from sam3_agent_ros.core.types import Frame, Query  # noqa: E402
from sam3_agent_ros.llm.openai_client import OpenAiClient  # noqa: E402
from test.fakes import reply_shapes  # noqa: E402
from test.fakes.scripted_server import ScriptedServer, message_text  # noqa: E402
from test.fakes.segmenters import BoxSegmenter  # noqa: E402

BOXES = {reply_shapes.PROMPT: [(100, 200, 160, 260, 0.9), (400, 220, 470, 290, 0.8)]}


def responder_for(shape: reply_shapes.Shape, protocol: str):
    good = reply_shapes.good_replies(protocol)
    state = {"first": True}

    def respond(body: dict):
        if state["first"]:
            state["first"] = False
            return shape.reply
        answer = "\n".join(message_text(m) for m in body["messages"][2:]
                           if m.get("role") in ("user", "tool"))
        latest = answer.rsplit("segment_phrase(", 1)[-1] if "segment_phrase(" in answer else ""
        return good["select"] if "mask(s)" in latest else good["segment"]
    return respond


def run_case(shape: reply_shapes.Shape, protocol: str) -> dict:
    with ScriptedServer(responder=responder_for(shape, protocol)) as server:
        params = {"llm.backend": "openai", "llm.base_url": server.base_url,
                  "llm.timeout_s": 10.0, "llm.max_retries": 0, "agent.max_image_side": 320,
                  "agent.max_rounds": 8}
        if "llm.protocol" in PARAMETERS_BY_NAME:
            params["llm.protocol"] = protocol
        config = Config.from_params(params)
        agent = Agent(config, llm=OpenAiClient(config.llm, config.agent.max_image_side),
                      segmenter=BoxSegmenter(BOXES))
        image = np.random.default_rng(3).integers(0, 255, (480, 640, 3), dtype=np.uint8)
        result = agent.run(Frame(image, 1, 2, "camera"), Query("q", reply_shapes.QUERY))
        thinking_leaked = any(reply_shapes.THOUGHT in json.dumps(r.body)
                              for r in server.main_requests[1:])
    ids = [m.bbox for m in result.masks]
    correct = (result.status.value == "succeeded" and result.text_prompts[:1] ==
               [reply_shapes.PROMPT] and ids == [(100.0, 200.0, 160.0, 260.0)])
    return {"shape": shape.name, "protocol": protocol, "expected": shape.outcome,
            "status": result.status.value, "error": result.error, "rounds": result.rounds,
            "correct": correct, "thinking_leaked": thinking_leaked}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--label", default="this checkout", help="name of this run in the output")
    parser.add_argument("--json", help="write the rows to this file instead of build/bench/")
    args = parser.parse_args(argv)
    protocols = ["text"] + (["tools"] if "llm.protocol" in PARAMETERS_BY_NAME else [])
    rows = [run_case(shape, protocol) for protocol in protocols
            for shape in reply_shapes.shapes_for(protocol)]
    print(f"reply-shape corpus, {args.label}: {len(reply_shapes.SHAPES)} shapes, "
          f"{len(rows)} queries ({', '.join(protocols)})")
    print(f"{'protocol':8} {'expected':9} {'status':10} {'rounds':>6}  ok  shape")
    for row in rows:
        print(f"{row['protocol']:8} {row['expected']:9} {row['status']:10} {row['rounds']:>6}  "
              f"{'yes' if row['correct'] else 'NO ':3} {row['shape']}"
              + ("  [thinking leaked]" if row["thinking_leaked"] else ""))
    for protocol in protocols:
        subset = [r for r in rows if r["protocol"] == protocol]
        correct = sum(r["correct"] for r in subset)
        print(f"{protocol}: {correct}/{len(subset)} correct, rounds per query mean "
              f"{statistics.mean(r['rounds'] for r in subset):.2f}, "
              f"failed {sum(r['status'] == 'failed' for r in subset)}, "
              f"thinking leaked in {sum(r['thinking_leaked'] for r in subset)}")
    summary = {}
    for protocol in protocols:
        subset = [r for r in rows if r["protocol"] == protocol]
        summary[protocol] = {
            "queries": len(subset), "correct": sum(r["correct"] for r in subset),
            "rounds_mean": round(statistics.mean(r["rounds"] for r in subset), 3),
            "failed": sum(r["status"] == "failed" for r in subset),
            "thinking_leaked": sum(r["thinking_leaked"] for r in subset)}
    data = {"command": "python bench/reply_shapes.py", "label": args.label,
            "shapes": len(reply_shapes.SHAPES), "protocols": summary, "rows": rows}
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(data, indent=1))
    else:
        from common import write_result  # bench/common.py

        write_result("reply_shapes", data)
    return 0


if __name__ == "__main__":
    sys.exit(main())

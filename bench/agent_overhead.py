"""Agent overhead per round, ours vs the upstream SAM 3 agent, side by side in one process.

Both loops run the same 5-round conversation with the same scripted replies (zero latency) and
the same masks; only the LLM and the SAM 3 model are replaced, everything else is real code:

    round 1  segment_phrase("cup")         -> 6 masks
    round 2  segment_phrase("mug")         -> 6 other masks (replace the first)
    round 3  segment_phrase("coffee mug")  -> 6 other masks
    round 4  examine_each_mask             -> 6 verifier calls: Reject masks 2 and 5, Accept rest
    round 5  select_masks_and_return [1,3] -> old masks 1 and 4 (checked equal on both sides)

Counted ("overhead") on each side: everything from the start of the query to its result except
the time inside the scripted reply and the precomputed model output (both microseconds, measured
and subtracted). That includes building every request up to the JSON body an HTTP client would
send (``json.dumps`` of model + messages with base64 data-URL images), rendering, mask
post-processing, pruning, and for upstream its file I/O.

- ours: ``Agent.run`` with an LLM stub that does what ``OpenAiClient.complete`` does before the
  network (``to_openai_messages`` with a per-query ``ImageEncoder``: downscale to
  agent.max_image_side, JPEG) plus ``json.dumps``, then returns the scripted reply; the segmenter
  returns precomputed masks (then our ``Detections.coerce`` check runs as usual).
- upstream: ``sam3.agent.agent_core.agent_inference`` with its real ``send_generate_request``
  (reads each image file, base64) where only the ``openai.OpenAI`` class is replaced by a stub that
  does ``json.dumps`` and returns the scripted reply; and its real ``call_sam_service`` /
  ``sam3_inference`` (PIL open, box normalisation, RLE encoding, overlap removal, JSON file,
  matplotlib rendering, PNG files) with a stand-in processor whose ``set_image`` /
  ``set_text_prompt`` return the precomputed masks as SAM 3 would. Its prompt files (missing from
  the wheel) are placeholders of our prompts' lengths, written to a temporary directory. Upstream
  needs the frame as a file: it is written before the clock starts (not counted). Its prints go
  to /dev/null.

Run alone: ``.venv/bin/python bench/agent_overhead.py [--runs-ours 10] [--runs-upstream 2]``.
"""

from __future__ import annotations

import argparse
import functools
import json
import re
import shutil
import sys
import tempfile
import threading
import time
import types
import weakref
from pathlib import Path

import cv2
import numpy as np
from common import (
    RESOLUTIONS,
    ROOT,
    bench_frame,
    blob_masks,
    command_line,
    median,
    quiet,
    write_result,
)

from sam3_agent_ros.config import Config  # noqa: E402  (after common puts ROOT on sys.path)
from sam3_agent_ros.core.agent import Agent  # noqa: E402
from sam3_agent_ros.core.ports import Detections  # noqa: E402
from sam3_agent_ros.core.types import Frame, LlmReply, Query, QueryStatus  # noqa: E402
from sam3_agent_ros.llm.encoding import ImageEncoder, to_openai_messages  # noqa: E402
from test.fakes.scripted_llm import ScriptedLlm, examine, segment, select  # noqa: E402

QUERY = "the coffee mugs on the left"
PROMPTS = ["cup", "mug", "coffee mug"]
N_MASKS = 6
REJECTED = {2, 5}  # 1-based ids the verifier rejects
SELECTED = [1, 3]  # ids after examine (renumbered): old masks 1 and 4
MAIN_ROUNDS = 5
VERIFIER_MARK = "<verdict>"  # our verifier prompt asks for it; the upstream placeholder too


# --- shared inputs ---------------------------------------------------------------------------


def segmentations(width: int, height: int) -> dict[str, Detections]:
    return {p: Detections(*blob_masks(width, height, N_MASKS, seed=k))
            for k, p in enumerate(PROMPTS)}


def main_script() -> list[str]:
    return [*(segment(p) for p in PROMPTS), examine(), select(*SELECTED)]


def verdict_text(mask_id: int) -> str:
    word = "Reject" if mask_id in REJECTED else "Accept"
    return f"Checked the highlighted region. <verdict>{word}</verdict>"


class Stopwatch:
    """Sums the time spent inside the stand-ins (subtracted from the query time)."""

    def __init__(self):
        self.seconds = 0.0
        self._lock = threading.Lock()

    def add(self, seconds: float) -> None:
        with self._lock:
            self.seconds += seconds


# --- ours ------------------------------------------------------------------------------------


class PrecomputedSegmenter:
    def __init__(self, outputs: dict[str, Detections], stopwatch: Stopwatch):
        self.outputs, self.stopwatch = outputs, stopwatch

    def segment(self, image, text_prompt):
        started = time.perf_counter()
        try:
            return self.outputs[text_prompt]
        finally:
            self.stopwatch.add(time.perf_counter() - started)


class EncodingScriptedLlm:
    """What ``OpenAiClient.complete`` does before the network, then a scripted reply."""

    def __init__(self, inner: ScriptedLlm, max_image_side: int, stopwatch: Stopwatch):
        self.inner, self.max_image_side, self.stopwatch = inner, max_image_side, stopwatch
        self._encoders: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()
        self.request_bytes: list[int] = []

    def complete(self, messages, cancel) -> LlmReply:
        with self._lock:
            encoder = self._encoders.setdefault(cancel, ImageEncoder(self.max_image_side))
        payload = to_openai_messages(messages, encoder)
        body = json.dumps({"model": "bench-model", "messages": payload, "temperature": 0.0,
                           "max_tokens": 2048})
        self.request_bytes.append(len(body))
        started = time.perf_counter()
        try:
            return self.inner.complete(messages, cancel)
        finally:
            self.stopwatch.add(time.perf_counter() - started)


def our_verifier(messages) -> str:
    key = messages[1].images[2].key  # ".../examine-1-mask-<id>-crop"
    return verdict_text(int(re.search(r"mask-(\d+)-crop", key).group(1)))


def run_ours(image: np.ndarray, outputs: dict[str, Detections]) -> tuple[float, float, list]:
    """One query; returns (overhead wall s, process CPU s, selected mask areas)."""
    config = Config.from_params({})
    stopwatch = Stopwatch()
    llm = EncodingScriptedLlm(ScriptedLlm(main_script(), verifier=our_verifier),
                              config.agent.max_image_side, stopwatch)
    agent = Agent(config, llm, PrecomputedSegmenter(outputs, stopwatch))
    frame = Frame(image, 1, 0, "camera")
    cpu0, wall0 = time.process_time(), time.perf_counter()
    result = agent.run(frame, Query("bench", QUERY))
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    if result.status is not QueryStatus.SUCCEEDED or result.rounds != MAIN_ROUNDS:
        raise RuntimeError(f"our agent did not follow the script: {result.status} "
                           f"{result.error} rounds={result.rounds}")
    return wall - stopwatch.seconds, cpu, sorted(m.area for m in result.masks)


# --- upstream --------------------------------------------------------------------------------


def load_upstream():
    """Import the upstream agent (needs the CPU import fixes and matplotlib)."""
    from sam3_agent_ros.segmenters.sam3_compat import apply_import_fixes

    apply_import_fixes()
    import warnings

    try:
        import matplotlib  # noqa: F401  (upstream's renderer; not a dependency of ours)
    except ImportError:
        sys.exit("bench/agent_overhead.py: the upstream agent renders with matplotlib, which is "
                 "not installed: .venv/bin/pip install matplotlib==3.11.2 (a benchmark-only "
                 "dependency, listed in requirements/dev.txt)")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from sam3.agent import agent_core, client_llm, client_sam3
    return agent_core, client_llm, client_sam3


def write_placeholder_prompts(directory: Path) -> None:
    """Upstream reads <dir of agent_core>/system_prompts/*.txt; the wheel lacks them. Placeholders
    of the same length as our prompts (so request sizes are comparable); no upstream text."""
    prompts = directory / "system_prompts"
    prompts.mkdir(parents=True, exist_ok=True)

    def filler(length: int, mark: str = "") -> str:
        text = mark + " Placeholder benchmark prompt."
        return (text * (length // len(text) + 1))[:length]

    system_len = len((ROOT / "prompts" / "system.md").read_text(encoding="utf-8"))
    verifier_len = len((ROOT / "prompts" / "verifier.md").read_text(encoding="utf-8"))
    (prompts / "system_prompt.txt").write_text(filler(system_len), encoding="utf-8")
    (prompts / "system_prompt_iterative_checking.txt").write_text(
        VERIFIER_MARK + filler(verifier_len - len(VERIFIER_MARK)), encoding="utf-8")


class FakeOpenAI:
    """Stands in for ``openai.OpenAI`` inside upstream's ``send_generate_request``: serialises the
    request body as the SDK would, then answers from the script (main) or by mask order
    (verifier: upstream checks masks one by one, in order)."""

    script: list[str] = []
    verifier_calls = 0
    stopwatch = Stopwatch()

    def __init__(self, api_key=None, base_url=None):
        self.chat = types.SimpleNamespace(completions=types.SimpleNamespace(create=self._create))

    @classmethod
    def reset(cls, script: list[str], stopwatch: Stopwatch) -> None:
        cls.script, cls.verifier_calls, cls.stopwatch = list(script), 0, stopwatch

    def _create(self, model, messages, **kwargs):
        json.dumps({"model": model, "messages": messages, **kwargs})
        started = time.perf_counter()
        cls = type(self)
        system = messages[0]["content"]
        if VERIFIER_MARK in system:
            cls.verifier_calls += 1
            text = verdict_text(cls.verifier_calls)
        else:
            cls.verifier_calls = 0
            text = cls.script.pop(0)
        reply = types.SimpleNamespace(
            choices=[types.SimpleNamespace(message=types.SimpleNamespace(content=text))])
        cls.stopwatch.add(time.perf_counter() - started)
        return reply


class FakeSam3Processor:
    """Stands in for ``Sam3Processor``: returns the precomputed output state for the prompt, in
    SAM 3's format (boxes xyxy pixels, masks (N, 1, H, W) bool, scores)."""

    def __init__(self, outputs: dict[str, Detections], stopwatch: Stopwatch):
        import torch

        self.stopwatch = stopwatch
        self.states = {p: {"boxes": torch.from_numpy(s.boxes.astype(np.float32)),
                           "masks": torch.from_numpy(s.masks[:, None]),
                           "scores": torch.from_numpy(s.scores.astype(np.float32))}
                       for p, s in outputs.items()}

    def set_image(self, image):
        return {}

    def set_text_prompt(self, state, prompt):
        started = time.perf_counter()
        result = dict(self.states[prompt])
        self.stopwatch.add(time.perf_counter() - started)
        return result


def run_upstream(upstream, image_path: str, outputs: dict[str, Detections], workdir: Path,
                 script: list[str] | None = None) -> tuple[float, float, list]:
    agent_core, client_llm, client_sam3 = upstream
    import pycocotools.mask as mask_utils

    stopwatch = Stopwatch()
    FakeOpenAI.reset(script if script is not None else main_script(), stopwatch)
    processor = FakeSam3Processor(outputs, stopwatch)
    call_sam = functools.partial(client_sam3.call_sam_service, processor)
    output_dir = tempfile.mkdtemp(dir=workdir)
    try:
        cpu0, wall0 = time.process_time(), time.perf_counter()
        with quiet():
            _, final, _ = agent_core.agent_inference(
                image_path, QUERY, send_generate_request=client_llm.send_generate_request,
                call_sam_service=call_sam, output_dir=output_dir)
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    finally:
        shutil.rmtree(output_dir, ignore_errors=True)
    h, w = final["orig_img_h"], final["orig_img_w"]
    areas = sorted(int(mask_utils.decode({"size": [h, w], "counts": rle}).sum())
                   for rle in final["pred_masks"])
    return wall - stopwatch.seconds, cpu, areas


def install_upstream_stubs(upstream, prompt_dir: Path) -> None:
    agent_core, client_llm, _ = upstream
    write_placeholder_prompts(prompt_dir)
    # agent_core finds its prompts next to its own __file__: point that at the temp directory.
    agent_core.__file__ = str(prompt_dir / "agent_core.py")
    client_llm.OpenAI = FakeOpenAI  # only the network client; the rest of the call is real


def upstream_crash_check(upstream, image_path: str, outputs, workdir: Path) -> str:
    """A model mistake our loop corrects: the same prompt twice, then examine_each_mask."""
    script = [segment("cup"), segment("cup"), examine(), select(1)]
    try:
        run_upstream(upstream, image_path, outputs, workdir, script)
    except Exception as exc:  # noqa: BLE001 (recording how it fails is the point)
        return f"{type(exc).__name__}: {exc}"
    return "no crash"


def hotspots(repeats: int = 10) -> dict[str, float]:
    """CPU ms of the steps that dominate our per-round time at 1080p (for the write-up)."""
    from sam3_agent_ros import render
    from sam3_agent_ros.core.types import Mask
    from sam3_agent_ros.llm.encoding import downscale, encode_data_url

    width, height = RESOLUTIONS["1080p"]
    image = bench_frame(width, height)
    masks, scores, boxes = blob_masks(width, height, N_MASKS)
    small = downscale(image, 1008)
    steps = {
        "Mask.from_array, one 1080p mask":
            lambda: Mask.from_array(masks[0], scores[0], tuple(boxes[0])),
        "encoding.downscale 1920x1080 -> 1008": lambda: downscale(image, 1008),
        "render.overlay_masks, 6 masks, 1080p": lambda: render.overlay_masks(image, list(masks)),
        "render.single_mask_overlay, 1080p": lambda: render.single_mask_overlay(image, masks[0]),
        "encode_data_url JPEG 1008x567": lambda: encode_data_url(small),
    }
    out = {}
    for name, step in steps.items():
        step()
        started = time.process_time()
        for _ in range(repeats):
            step()
        out[name] = round((time.process_time() - started) / repeats * 1000, 2)
    return out


# --- driver ----------------------------------------------------------------------------------


def measure(resolution: str, runs_ours: int, runs_upstream: int, upstream, workdir: Path) -> dict:
    width, height = RESOLUTIONS[resolution]
    image = bench_frame(width, height)
    outputs = segmentations(width, height)
    image_path = str(workdir / f"frame_{resolution}.png")
    cv2.imwrite(image_path, cv2.cvtColor(image, cv2.COLOR_RGB2BGR))

    run_ours(image, outputs)  # warm-up (imports, caches); upstream was warmed up in main()
    ours, ours_cpu, theirs, theirs_cpu = [], [], [], []
    # Interleave so that machine noise hits both sides alike.
    for k in range(max(runs_ours, runs_upstream)):
        if k < runs_ours:
            wall, cpu, our_areas = run_ours(image, outputs)
            ours.append(wall)
            ours_cpu.append(cpu)
        if k < runs_upstream:
            wall, cpu, their_areas = run_upstream(upstream, image_path, outputs, workdir)
            theirs.append(wall)
            theirs_cpu.append(cpu)
    if our_areas != their_areas:
        raise RuntimeError(f"the two agents selected different masks: {our_areas} vs "
                           f"{their_areas}")
    ours_ms = median(ours) / MAIN_ROUNDS * 1000
    theirs_ms = median(theirs) / MAIN_ROUNDS * 1000
    return {"resolution": resolution, "width": width, "height": height,
            "runs_ours": runs_ours, "runs_upstream": runs_upstream,
            "ours_ms_per_round": round(ours_ms, 2),
            "upstream_ms_per_round": round(theirs_ms, 2),
            "ratio_upstream_over_ours": round(theirs_ms / ours_ms, 1),
            "ours_cpu_ms_per_round": round(median(ours_cpu) / MAIN_ROUNDS * 1000, 2),
            "upstream_cpu_ms_per_round": round(median(theirs_cpu) / MAIN_ROUNDS * 1000, 2),
            "selected_mask_areas": our_areas}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs-ours", type=int, default=10)
    parser.add_argument("--runs-upstream", type=int, default=1,
                        help="upstream takes ~15 s (480p) / ~45 s (1080p) per query here")
    parser.add_argument("--resolutions", nargs="+", default=list(RESOLUTIONS),
                        choices=list(RESOLUTIONS))
    args = parser.parse_args(argv)
    upstream = load_upstream()
    rows = []
    with tempfile.TemporaryDirectory(prefix="sam3_bench_") as temp:
        workdir = Path(temp)
        install_upstream_stubs(upstream, workdir / "upstream_prompts")
        small = RESOLUTIONS["480p"]
        small_path = str(workdir / "warmup.png")
        cv2.imwrite(small_path, bench_frame(*small))
        small_outputs = segmentations(*small)
        # Warm-up (imports, matplotlib font cache), and a model mistake our loop corrects:
        # the same prompt twice, then examine_each_mask.
        run_upstream(upstream, small_path, small_outputs, workdir)
        crash = upstream_crash_check(upstream, small_path, small_outputs, workdir)
        print(f"upstream on 'same prompt twice, then examine': {crash}", flush=True)
        for resolution in args.resolutions:
            row = measure(resolution, args.runs_ours, args.runs_upstream, upstream, workdir)
            rows.append(row)
            print(f"{resolution}: ours {row['ours_ms_per_round']:.1f} ms/round, upstream "
                  f"{row['upstream_ms_per_round']:.1f} ms/round, ratio "
                  f"{row['ratio_upstream_over_ours']:.1f}x", flush=True)
    steps = hotspots()
    from sam3_agent_ros.core.tools import QueryState

    renders_on_view = "view" in QueryState.__dataclass_fields__  # overlays at the LLM's size
    write_result("agent_overhead", {"command": command_line(), "rows": rows,
                                    "hotspots_cpu_ms_1080p": steps,
                                    "core_renders_on_llm_view": renders_on_view,
                                    "conversation": "segment cup, segment mug, segment coffee "
                                    "mug, examine (6 verifier calls), select [1,3]",
                                    "upstream_repeated_prompt_then_examine": crash})
    return 0


if __name__ == "__main__":
    sys.exit(main())

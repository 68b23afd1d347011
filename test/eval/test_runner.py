"""Running samples: one record per sample, --jobs over real HTTP, a clean stop, shared segmenter."""

from __future__ import annotations

import json
import threading
from pathlib import Path

from sam3_agent_ros.config import Config
from sam3_agent_ros.core.agent import Agent
from sam3_agent_ros.core.cancel import CancelToken
from sam3_agent_ros.core.errors import LlmError
from sam3_agent_ros.core.prompts import load_prompts
from sam3_agent_ros.eval.datasets import Sample, load_dataset
from sam3_agent_ros.eval.runner import (
    SAMPLES,
    EvalRunner,
    SerialSegmenter,
    evaluate_sample,
    mask_filename,
    read_samples_file,
)
from sam3_agent_ros.llm.offline import OfflinePlanner
from sam3_agent_ros.llm.openai_client import OpenAiClient
from sam3_agent_ros.segmenters.color import ColorSegmenter
from test.fakes.offline_responder import offline_responder
from test.fakes.scripted_llm import ScriptedLlm
from test.fakes.scripted_server import ScriptedServer

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "data" / "eval_tabletop"
OFFLINE = Config.from_params({"llm.backend": "offline", "segmenter.backend": "color"})
PROMPTS = load_prompts(OFFLINE.agent.prompts_dir)


def offline_agent(llm=None, segmenter=None) -> Agent:
    return Agent(OFFLINE, llm=llm or OfflinePlanner(), segmenter=segmenter or ColorSegmenter(),
                 prompts=PROMPTS)


def scores(rows: list[dict]) -> dict:
    return {r["id"]: (r["status"], r["iou"], r["intersection"], r["union"], r["mask"])
            for r in rows}


def test_mask_filenames_are_safe_and_distinct():
    names = {mask_filename(i) for i in ("a#0", "a_0", "a/0", "a 0", "scene001-q2")}
    assert len(names) == 5 and "scene001-q2.png" in names
    assert all("/" not in n and "#" not in n and " " not in n for n in names)


def test_read_samples_file_drops_a_line_cut_short(tmp_path):
    path = tmp_path / SAMPLES
    path.write_text(json.dumps({"id": "a", "iou": 1.0}) + "\n" + '{"id": "b", "io')
    assert [r["id"] for r in read_samples_file(path)] == ["a"]
    assert read_samples_file(tmp_path / "none.jsonl") == []


def test_unreadable_image_is_a_failed_sample_without_any_model_call(tmp_path):
    llm = ScriptedLlm([])  # any call fails the test
    row = evaluate_sample(offline_agent(llm=llm), Sample("x", "q", tmp_path / "missing.jpg"),
                          CancelToken(), tmp_path)
    assert row["status"] == "failed" and "no such file" in row["error"]
    assert row["iou"] == 0.0 and row["union"] is None and row["mask"] is None
    assert not llm.main_requests


def test_an_image_over_max_image_pixels_is_a_failed_sample_without_any_model_call(
        tmp_path, png_bomb_file):
    """A decompression bomb in a dataset fails its sample, undecoded; the run goes on."""
    llm = ScriptedLlm([])  # any call fails the test
    row = evaluate_sample(offline_agent(llm=llm), Sample("bomb", "q", png_bomb_file),
                          CancelToken(), tmp_path)
    assert row["status"] == "failed"
    assert "20000x20000 = 400000000 pixels, more than max_image_pixels=" in row["error"]
    assert not llm.main_requests


def test_jobs_over_http_score_exactly_like_the_in_process_backend(tmp_path):
    samples = load_dataset(SHIPPED).samples[:12]
    serial = EvalRunner(offline_agent, tmp_path / "serial", jobs=1).run(samples)
    with ScriptedServer(responder=offline_responder(delay_s=0.01)) as server:
        config = Config.from_params({"llm.backend": "openai", "llm.base_url": server.base_url,
                                     "llm.timeout_s": 10.0})
        llm = OpenAiClient(config.llm, config.agent.max_image_side)
        segmenter = SerialSegmenter(ColorSegmenter())
        runner = EvalRunner(lambda: Agent(config, llm=llm, segmenter=segmenter, prompts=PROMPTS),
                            tmp_path / "jobs", jobs=4)
        parallel = runner.run(samples)
        server.assert_clean(all_consumed=False)
    assert scores(parallel) == scores(serial)
    assert len(read_samples_file(tmp_path / "jobs" / SAMPLES)) == len(samples)
    assert all(r["prompt_tokens"] == 100 * r["llm_calls"] for r in parallel)
    for row in parallel:
        if row["mask"]:
            assert (tmp_path / "jobs" / row["mask"]).is_file()


class _StopAtQuery:
    """The offline planner, except that the n-th query sets ``stop`` and waits to be cancelled."""

    def __init__(self, stop: threading.Event, n: int):
        self.planner, self.stop, self.n, self.first_requests = OfflinePlanner(), stop, n, 0

    def complete(self, messages, cancel):
        if len(messages) == 2 and "<verdict>" not in messages[0].text_content:
            self.first_requests += 1
            if self.first_requests == self.n:
                self.stop.set()
                cancel.wait(30.0)
                raise LlmError("cancelled" if cancel.cancelled else "never cancelled")
        return self.planner.complete(messages, cancel)


def test_a_stop_keeps_finished_samples_and_drops_the_interrupted_one(tmp_path):
    samples = load_dataset(SHIPPED).samples[:5]
    stop = threading.Event()
    llm = _StopAtQuery(stop, n=4)
    rows = EvalRunner(lambda: offline_agent(llm=llm), tmp_path, jobs=1, stop=stop).run(samples)
    assert [r["id"] for r in rows] == [s.id for s in samples[:3]]
    assert [r["id"] for r in read_samples_file(tmp_path / SAMPLES)] == [s.id for s in samples[:3]]
    # The rest runs later (what --resume does) and everything scores as in one go.
    rest = EvalRunner(offline_agent, tmp_path, jobs=1).run(samples[3:])
    assert [r["id"] for r in rest] == [s.id for s in samples[3:]]
    whole = EvalRunner(offline_agent, tmp_path / "whole", jobs=1).run(samples)
    assert scores(read_samples_file(tmp_path / SAMPLES)) == scores(whole)


class _CountingSegmenter:
    def __init__(self):
        self.inner, self.active, self.most, self.calls = ColorSegmenter(), 0, 0, 0
        self.lock = threading.Lock()

    def segment(self, image, text_prompt):
        with self.lock:
            self.active += 1
            self.calls += 1
            self.most = max(self.most, self.active)
        try:
            threading.Event().wait(0.005)  # widen the window in which calls could overlap
            return self.inner.segment(image, text_prompt)
        finally:
            with self.lock:
                self.active -= 1


def test_segmenter_calls_never_overlap_across_workers(tmp_path):
    counting = _CountingSegmenter()
    shared = SerialSegmenter(counting)
    samples = load_dataset(SHIPPED).samples[:16]
    EvalRunner(lambda: offline_agent(segmenter=shared), tmp_path, jobs=8).run(samples)
    assert counting.calls >= len(samples) and counting.most == 1

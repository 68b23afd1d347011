"""`sam3-agent run` as a user runs it: a subprocess, JSON on stdout, exit codes (interface §4)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "data" / "example_tabletop.png"
GROUND_TRUTH = ROOT / "data" / "example_tabletop_gt.npz"


def sam3_agent(*args: str, timeout: float = 120, env: dict[str, str] | None = None
               ) -> subprocess.CompletedProcess:
    env = dict(os.environ if env is None else env, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "sam3_agent_ros.cli", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


OFFLINE = ["-p", "llm.backend:=offline", "-p", "segmenter.backend:=color"]
SAM3_INSTALLED = all(importlib.util.find_spec(name) for name in ("torch", "sam3"))
OFFLINE_BACKENDS = {"llm": "offline", "segmenter": "color"}
HF_VARIABLES = ("HF_HOME", "HF_HUB_CACHE", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_OFFLINE",
                "HF_OIDC_RESOURCE")


def first_contact_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """A new user's environment: no API key variable, an empty Hugging Face home (no cached
    weights, no token)."""
    env = {k: v for k, v in os.environ.items()
           if k not in HF_VARIABLES and k != "OPENAI_API_KEY"}
    env["HF_HOME"] = str(tmp_path / "hf_home")
    env.update(extra)
    return env


def leftmost_blue_ground_truth() -> np.ndarray:
    from sam3_agent_demo.scene import load_ground_truth_masks

    masks = load_ground_truth_masks(GROUND_TRUTH)
    blue = [name for name in masks if "blue" in name]
    leftmost = min(blue, key=lambda n: np.nonzero(masks[n])[1].mean())
    return masks[leftmost]


def test_run_finds_the_leftmost_blue_object(tmp_path):
    proc = sam3_agent("run", "--image", str(EXAMPLE), "--query", "the leftmost blue object",
                      *OFFLINE, "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)  # stdout holds the JSON and nothing else
    assert result["status"] == "succeeded" and len(result["masks"]) == 1
    assert result["backends"] == OFFLINE_BACKENDS
    assert "DEMO BACKENDS" in proc.stderr and "not from a model" in proc.stderr
    mask = cv2.imread(str(tmp_path / "mask.png"), cv2.IMREAD_GRAYSCALE) > 0
    truth = leftmost_blue_ground_truth()
    iou = (mask & truth).sum() / (mask | truth).sum()
    assert iou >= 0.9
    assert (tmp_path / "overlay.png").is_file()
    assert result["width"] == mask.shape[1] and result["height"] == mask.shape[0]


def test_absent_object_is_no_mask_with_exit_0():
    proc = sam3_agent("run", "--image", str(EXAMPLE), "--query", "the purple object", *OFFLINE)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["status"] == "no_mask"


def test_params_file_and_trace(tmp_path):
    params = tmp_path / "p.yaml"
    params.write_text("sam3_agent:\n  ros__parameters:\n    llm:\n      backend: offline\n"
                      "    segmenter:\n      backend: color\n")
    trace = tmp_path / "trace.jsonl"
    proc = sam3_agent("run", "--image", str(EXAMPLE), "--query", "the largest red object",
                      "--params-file", str(params), "--trace", str(trace))
    assert proc.returncode == 0, proc.stderr
    records = [json.loads(line) for line in trace.read_text().splitlines()]
    assert len(records) >= 2
    assert "base64" not in trace.read_text()  # images are placeholders


@pytest.mark.parametrize("args, fragment", [
    (["-p", "llm.modle:=x"], "unknown parameter 'llm.modle'"),
    (["-p", "agent.max_rounds:=zero"], "agent.max_rounds"),
    (["--params-file", "/nonexistent.yaml"], "cannot read params file"),
])
def test_bad_parameters_are_usage_errors(args, fragment):
    proc = sam3_agent("run", "--image", str(EXAMPLE), "--query", "x", *args)
    assert proc.returncode == 2 and fragment in proc.stderr and proc.stdout == ""


def test_unreadable_image_is_a_usage_error(tmp_path):
    bad = tmp_path / "bad.png"
    bad.write_bytes(b"not an image")
    proc = sam3_agent("run", "--image", str(bad), "--query", "x", *OFFLINE)
    assert proc.returncode == 2 and "not a readable image" in proc.stderr
    proc = sam3_agent("run", "--image", str(tmp_path / "missing.png"), "--query", "x")
    assert proc.returncode == 2 and "no such file" in proc.stderr


def test_a_decompression_bomb_is_refused_before_decoding(png_bomb_file):
    """The 389 kB PNG declaring 20000x20000 (1.2 GB decoded): a usage error from its header,
    with no big allocation (peak RSS of the CLI run stays that of importing the package)."""
    from test.fakes.peak_rss import peak_rss_mb

    code = """
from sam3_agent_ros.cli import main
status = main(["run", "--image", {image!r}, "--query", "x",
               "-p", "llm.backend:=offline", "-p", "segmenter.backend:=color"])
print("STATUS", status)
"""
    baseline, out = peak_rss_mb(code.format(image=str(EXAMPLE)))  # a 640x480 query, answered
    assert "STATUS 0" in out
    peak, out = peak_rss_mb(code.format(image=str(png_bomb_file)))
    assert "STATUS 2" in out
    assert peak < baseline + 50, (baseline, peak)  # the decoded bomb alone would be 1144 MiB
    proc = sam3_agent("run", "--image", str(png_bomb_file), "--query", "x", *OFFLINE)
    assert proc.returncode == 2 and proc.stdout == ""
    assert ("too large: 20000x20000 = 400000000 pixels, more than max_image_pixels=40000000 "
            "(not decoded)") in proc.stderr


def test_max_image_pixels_applies_to_the_cli_image():
    proc = sam3_agent("run", "--image", str(EXAMPLE), "--query", "x", *OFFLINE,
                      "-p", "max_image_pixels:=1000")
    assert proc.returncode == 2 and "640x480 = 307200 pixels" in proc.stderr


def _example_depth_files(tmp_path: Path) -> tuple[Path, Path]:
    """The example image's depth as a 16-bit PNG (millimetres, full size) and as a float .npy
    in metres at half size."""
    with np.load(GROUND_TRUTH) as truth:
        depth_mm = truth["depth_mm"]
    png = tmp_path / "depth.png"
    cv2.imwrite(str(png), depth_mm)
    half = cv2.resize(depth_mm, (320, 240), interpolation=cv2.INTER_NEAREST_EXACT)
    npy = tmp_path / "depth_half.npy"
    np.save(npy, half.astype(np.float32) / 1000.0)
    return png, npy


def test_run_with_depth_gives_each_mask_a_position_and_a_box(tmp_path):
    """3D without ROS, both ways: a full-size 16-bit PNG with --intrinsics, and a half-size
    float .npy with the colour camera's calibration file (its size says how to scale)."""
    from sam3_agent_demo.scene import box_errors, render_scene
    from sam3_agent_ros.geometry.rotations import quaternion_to_matrix

    png, npy = _example_depth_files(tmp_path)
    calibration = tmp_path / "colour.yaml"
    calibration.write_text("image_width: 640\nimage_height: 480\ncamera_matrix:\n  rows: 3\n"
                           "  cols: 3\n  data: [600, 0, 320, 0, 600, 240, 0, 0, 1]\n")
    truth = render_scene(seed=7)  # the example image's scene
    results = []
    for depth_args in (["--depth", str(png), "--intrinsics", "600,600,320,240"],
                       ["--depth", str(npy), "--camera-info", str(calibration)]):
        proc = sam3_agent("run", "--image", str(EXAMPLE), "--query", "the largest red object",
                          *OFFLINE, *depth_args)
        assert proc.returncode == 0, proc.stderr
        mask = json.loads(proc.stdout)["masks"][0]
        position = [mask["position"][a] for a in "xyz"]
        assert position == pytest.approx(truth.positions["red_box"], abs=0.01)
        box = mask["box"]  # reaching the table (issue 36): its top face is the object's
        rotation = quaternion_to_matrix([box["orientation"][a] for a in "xyzw"])
        size = [box["size"][a] for a in "xyz"]
        top = np.array([box["center"][a] for a in "xyz"]) - 0.5 * size[2] * rotation[:, 2]
        errors = box_errors(truth.true_box("red_box"), list(top), size, rotation)
        assert errors.within(), errors.describe()
        assert size[2] == pytest.approx(truth.scene.object("red_box").height, abs=0.01)
        results.append(mask)
    assert results[0]["box"] != results[1]["box"]  # really the half-size depth the second time


@pytest.mark.parametrize("args, fragment", [
    (["--depth", "DEPTH"], "--depth needs the colour camera's --intrinsics"),
    (["--intrinsics", "600,600,320,240"], "go with --depth"),
    (["--depth", "DEPTH", "--intrinsics", "600,600"], "--intrinsics 600,600: expected four"),
    (["--depth", "MISSING", "--intrinsics", "600,600,320,240"], "no such file"),
    (["--depth", "SQUARE", "--intrinsics", "600,600,320,240"], "aspect ratio"),
    (["--depth", "DEPTH", "--camera-info", "MISSING"], "--camera-info"),
    (["--depth", "DEPTH", "--depth-scale", "-1", "--intrinsics", "600,600,320,240"],
     "positive number of metres"),
])
def test_bad_depth_arguments_are_usage_errors(tmp_path, args, fragment):
    png, _ = _example_depth_files(tmp_path)
    cv2.imwrite(str(tmp_path / "square.png"), np.ones((100, 100), np.uint16))
    paths = {"DEPTH": str(png), "MISSING": str(tmp_path / "missing"),
             "SQUARE": str(tmp_path / "square.png")}
    proc = sam3_agent("run", "--image", str(EXAMPLE), "--query", "x", *OFFLINE,
                      *[paths.get(a, a) for a in args])
    assert proc.returncode == 2 and proc.stdout == "", proc.stderr
    assert fragment in proc.stderr


def test_missing_arguments_are_usage_errors():
    assert sam3_agent("run", "--query", "x").returncode == 2


def test_failed_query_exits_1_with_a_result(tmp_path):
    plugin = "test.fakes.segmenters:broken_factory"
    proc = sam3_agent("run", "--image", str(EXAMPLE), "--query", "the blue object",
                      "-p", "llm.backend:=offline", "-p", f"segmenter.backend:={plugin}")
    assert proc.returncode == 1
    result = json.loads(proc.stdout)
    assert result["status"] == "failed" and "broken_factory" in result["error"]
    assert result["backends"] == {"llm": "offline", "segmenter": plugin}


def test_segmenter_plugin_form(tmp_path):
    plugin = "test.fakes.segmenters:factory"
    proc = sam3_agent("run", "--image", str(EXAMPLE), "--query", "the thing",
                      "-p", "llm.backend:=offline", "-p", f"segmenter.backend:={plugin}")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["status"] == "succeeded"
    assert result["masks"][0]["bbox"] == [10.0, 10.0, 30.0, 30.0]
    assert result["backends"] == {"llm": "offline", "segmenter": plugin}
    # Only the demo planner is named in the warning: the plugin is no demo backend.
    assert "DEMO BACKENDS (llm.backend=offline)" in proc.stderr


def test_offline_flag_is_the_two_offline_overrides(tmp_path):
    proc = sam3_agent("run", "--image", str(EXAMPLE), "--query", "the leftmost blue object",
                      "--offline", "-p", "segmenter.backend:=color",
                      env=first_contact_env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["status"] == "succeeded" and result["backends"] == OFFLINE_BACKENDS
    assert "DEMO BACKENDS" in proc.stderr


@pytest.mark.parametrize("override", ["llm.backend:=openai", "segmenter.backend:=sam3"])
def test_offline_flag_against_a_contradicting_override_is_a_usage_error(override):
    proc = sam3_agent("run", "--image", str(EXAMPLE), "--query", "x", "--offline", "-p", override)
    assert proc.returncode == 2 and proc.stdout == ""
    assert "--offline sets" in proc.stderr and override in proc.stderr


def test_the_defaults_without_key_or_weights_fail_at_once_naming_each_fix(tmp_path):
    """A new user's first run: the real backends by default, nothing set up. One line per
    missing thing, each saying how to fix it and how to try without a model; exit 2 (the
    command cannot run as configured), nothing on stdout, nothing loaded."""
    proc = sam3_agent("run", "--image", str(EXAMPLE), "--query", "the blue object",
                      env=first_contact_env(tmp_path))
    assert proc.returncode == 2 and proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 2, proc.stderr
    key, weights = lines
    assert "OPENAI_API_KEY" in key and "export OPENAI_API_KEY=EMPTY" in key and "vLLM" in key
    if SAM3_INSTALLED:
        assert "facebook/sam3" in weights and "hf auth login" in weights
        assert "segmenter.checkpoint" in weights and "docs/sam3.md" in weights
    else:  # a venv without torch (docs/distros.md): that is what SAM 3 lacks first
        assert "not installed" in weights and "docs/sam3.md" in weights
    assert all(line.startswith("sam3-agent run: ") and line.endswith(
        "to try without a model: add --offline") for line in lines)
    assert "Traceback" not in proc.stderr and "SAM 3 loaded" not in proc.stderr


@pytest.mark.parametrize("override, fragments", [
    pytest.param("segmenter.checkpoint:=/nonexistent/sam3.pt",
                 ["/nonexistent/sam3.pt", "does not exist"],
                 marks=pytest.mark.skipif(not SAM3_INSTALLED, reason="no torch/sam3 here")),
    ("llm.base_url:=", ["llm.base_url is empty", "http://127.0.0.1:8000/v1"]),
    ("llm.base_url:=gpu-box:8000/v1", ["not an http(s) URL"]),
])
def test_a_missing_endpoint_or_checkpoint_is_one_line_with_the_fix(tmp_path, override,
                                                                   fragments):
    env = first_contact_env(tmp_path, OPENAI_API_KEY="EMPTY")
    proc = sam3_agent("run", "--image", str(EXAMPLE), "--query", "x", "-p", override, env=env)
    assert proc.returncode == 2 and proc.stdout == ""
    problems = [line for line in proc.stderr.splitlines() if line.startswith("sam3-agent run:")]
    matching = [line for line in problems if all(f in line for f in fragments)]
    assert matching and matching[0].endswith("to try without a model: add --offline"), \
        proc.stderr


def test_run_with_native_tool_calling_against_a_scripted_server(tmp_path):
    """`-p llm.protocol:=tools`: segment -> duplicate (refused) -> examine -> select, every call
    answered by a tool message with its tool_call_id (interface §1b)."""
    from test.fakes.scripted_server import ScriptedServer, native_call, verdict

    script = [native_call("segment_phrase", reasoning="Blue first.", call_id="a1",
                          text_prompt="blue object"),
              native_call("segment_phrase", call_id="a2", text_prompt="blue object"),
              native_call("examine_each_mask", call_id="a3"),
              native_call("select_masks_and_return", call_id="a4", final_answer_masks=[1])]
    trace = tmp_path / "trace.jsonl"
    with ScriptedServer(script, verifier=lambda body: verdict(True)) as server:
        proc = sam3_agent("run", "--image", str(EXAMPLE), "--query", "the blue object",
                          "-p", "llm.backend:=openai", "-p", f"llm.base_url:={server.base_url}",
                          "-p", "llm.protocol:=tools", "-p", "segmenter.backend:=color",
                          "--trace", str(trace), env=dict(os.environ, OPENAI_API_KEY="EMPTY"))
    server.assert_clean()
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["status"] == "succeeded" and result["rounds"] == 4
    assert result["backends"] == {"llm": "openai", "segmenter": "color"}
    assert "DEMO BACKENDS (segmenter.backend=color)" in proc.stderr
    assert result["text_prompts"] == ["blue object"]  # the duplicate never ran
    answered = {}
    for request in server.main_requests:
        messages = request.messages
        assert request.body["tools"] and len(messages) <= 10 and request.n_images <= 2
        for index, message in enumerate(messages):
            for call in message.get("tool_calls") or []:
                assert messages[index + 1]["tool_call_id"] == call["id"]
                answered[call["id"]] = messages[index + 1]["content"]
    assert set(answered) == {"a1", "a2", "a3"}
    assert "was NOT run" in answered["a2"]
    assert "kept" in answered["a3"]
    # The status log on stderr carries the round's reasoning; the trace records the calls.
    assert '"reasoning": "Blue first."' in proc.stderr
    responses = [json.loads(line) for line in trace.read_text().splitlines()
                 if '"kind": "response"' in line]
    assert [r["tool_calls"][0]["id"] for r in responses if r.get("tool_calls")][:4] == \
        ["a1", "a2", "a3", "a4"]


def test_run_refines_an_earlier_runs_answer_on_its_frame(tmp_path):
    """Issue 20: --out keeps the frame, masks and answer; --refines DIR answers on that frame."""
    first_dir, second_dir = tmp_path / "first", tmp_path / "second"
    first = sam3_agent("run", "--image", str(EXAMPLE), "--query", "the leftmost blue object",
                       *OFFLINE, "--out", str(first_dir))
    assert first.returncode == 0, first.stderr
    assert {p.name for p in first_dir.iterdir()} >= {"frame.png", "masks", "answer.json"}
    trace = tmp_path / "trace.jsonl"
    proc = sam3_agent("run", "--refines", str(first_dir), "--query", "no, the other one",
                      *OFFLINE, "--out", str(second_dir), "--trace", str(trace))
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert (result["query_id"], result["refines"], result["status"]) == (
        "cli-2", "cli-1", "succeeded")
    assert (result["stamp"], result["frame_id"]) == (json.loads(first.stdout)["stamp"], "image")
    mask = cv2.imread(str(second_dir / "mask.png"), cv2.IMREAD_GRAYSCALE) > 0
    other = leftmost_blue_ground_truth()
    assert not (mask & other).any() and mask.sum() > 1000  # the other blue object
    requests = [json.loads(line) for line in trace.read_text().splitlines()
                if '"kind": "request"' in line and '"conversation": "main"' in line]
    assert requests[0]["n_images"] == 2 and all(r["n_images"] <= 2 for r in requests)
    first_user = requests[0]["messages"][1]["content"]  # the frame, then the text
    assert 'Earlier answer 1: query "the leftmost blue object"' in first_user[1]
    # a refinement of the refinement, written over its own folder: the chain goes on
    again = sam3_agent("run", "--refines", str(second_dir), "--query", "not that one either",
                       *OFFLINE, "--out", str(second_dir))
    assert again.returncode == 0, again.stderr
    assert (json.loads(again.stdout)["query_id"], json.loads(again.stdout)["status"]) == (
        "cli-3", "no_mask")
    chain = json.loads((second_dir / "answer.json").read_text())["earlier"]
    assert [e["query_id"] for e in chain] == ["cli-1", "cli-2"]


def test_refines_usage_errors(tmp_path):
    both = sam3_agent("run", "--image", str(EXAMPLE), "--refines", str(tmp_path), "--query", "x",
                      *OFFLINE)
    assert both.returncode == 2 and "not allowed with argument" in both.stderr
    empty = sam3_agent("run", "--refines", str(tmp_path), "--query", "x", *OFFLINE)
    assert empty.returncode == 2 and empty.stdout == ""
    assert f"--refines {tmp_path}: {tmp_path} has no answer.json" in empty.stderr
    failed_dir = tmp_path / "failed"
    plugin = "test.fakes.segmenters:broken_factory"
    sam3_agent("run", "--image", str(EXAMPLE), "--query", "x", "-p", "llm.backend:=offline",
               "-p", f"segmenter.backend:={plugin}", "--out", str(failed_dir))
    failed = sam3_agent("run", "--refines", str(failed_dir), "--query", "x", *OFFLINE)
    assert failed.returncode == 2 and "ended failed without an answer" in failed.stderr


# --- the demo package: part of the source repository, not of what a robot deploys ----------------

@pytest.mark.parametrize("argv", [["demo"], ["demo-follow", "--out", "x", "-p", "a:=b"],
                                  ["demo", "--help"]])
def test_demo_without_the_demo_package_says_how_to_get_it(monkeypatch, capsys, argv):
    """A robot's install has no sam3_agent_demo: ``sam3-agent demo`` is one line and exit 2."""
    for name in [m for m in sys.modules if m.split(".")[0] == "sam3_agent_demo"]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "sam3_agent_demo", None)  # `import` of it now fails
    from sam3_agent_ros.cli import main

    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert f"sam3-agent {argv[0]}: the demo package (sam3_agent_demo) is not installed" in err
    assert "make setup" in err and "pip install -e demo/" in err


def test_other_commands_still_refuse_unknown_arguments_without_the_demo_package(monkeypatch):
    monkeypatch.setitem(sys.modules, "sam3_agent_demo", None)
    from sam3_agent_ros.cli import main

    with pytest.raises(SystemExit) as info:
        main(["run", "--image", "x.png", "--query", "q", "--no-such-option"])
    assert info.value.code == 2


def test_demo_commands_come_from_the_demo_package():
    from sam3_agent_demo import commands as demo_commands
    from sam3_agent_ros.cli import build_parser

    parser = build_parser()
    args = parser.parse_args(["demo", "--out", "o"])
    assert args.handler is demo_commands.cmd_demo
    assert parser.parse_args(["demo-follow"]).handler is demo_commands.cmd_demo_follow


def _read_ply(path: Path) -> np.ndarray:
    data = path.read_bytes()
    head, body = data.split(b"end_header\n", 1)
    assert b"format binary_little_endian 1.0" in head
    count = int(head.split(b"element vertex ")[1].split(b"\n")[0])
    vertex = np.dtype([("x", "<f4"), ("y", "<f4"), ("z", "<f4"), ("red", "u1"), ("green", "u1"),
                       ("blue", "u1")])
    return np.frombuffer(body, vertex, count=count)


def test_run_with_depth_and_out_writes_the_targets_points(tmp_path):
    """issue 27: --out DIR gains points.ply, the selected mask's depth points (at most
    depth.cloud_max_points), around its measured position; no --out, no cloud work."""
    png, _ = _example_depth_files(tmp_path)
    out = tmp_path / "answer"
    proc = sam3_agent("run", "--image", str(EXAMPLE), "--query", "the largest red object",
                      *OFFLINE, "--depth", str(png), "--intrinsics", "600,600,320,240",
                      "--out", str(out), "-p", "depth.cloud_max_points:=500")
    assert proc.returncode == 0, proc.stderr
    position = json.loads(proc.stdout)["masks"][0]["position"]
    points = _read_ply(out / "points.ply")
    assert 100 < len(points) <= 500
    xyz = np.stack([points["x"], points["y"], points["z"]], axis=1)
    centre = np.median(xyz, axis=0)
    assert centre == pytest.approx([position[a] for a in "xyz"], abs=0.05)
    assert np.median(points["red"]) > np.median(points["blue"])  # the red object's colours

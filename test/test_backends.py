"""backends.missing_requirements: what the chosen backends lack, one line each naming the fix,
found before anything is built (the node's configure and the CLI call it first)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from sam3_agent_ros.backends import base_url_credentials_problem, missing_requirements
from sam3_agent_ros.config import OFFLINE_BACKENDS, Config
from test.fakes.secret_url import attack_url, leaks

SAM3_INSTALLED = all(importlib.util.find_spec(name) for name in ("torch", "sam3"))
needs_sam3 = pytest.mark.skipif(not SAM3_INSTALLED, reason="torch/sam3 not installed here")
KEY = {"OPENAI_API_KEY": "EMPTY"}
ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "data" / "example_tabletop.png"
TABLETOP = ROOT / "data" / "eval_tabletop"


def openai_only(**params) -> Config:
    """llm.backend openai (the default) with the offline segmenter: only the LLM is checked."""
    return Config.from_params({"segmenter.backend": "color", **params})


def sam3_only(**params) -> Config:
    return Config.from_params({"llm.backend": "offline", **params})


@pytest.fixture
def no_hub(tmp_path, monkeypatch):
    """An empty Hugging Face home: nothing cached, online, no token in the environment."""
    for name in ("HF_HUB_CACHE", "HF_HUB_OFFLINE", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN",
                 "HF_OIDC_RESOURCE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))
    return tmp_path / "hf_home" / "hub"


def test_the_offline_backends_need_nothing():
    assert missing_requirements(Config.from_params(OFFLINE_BACKENDS), environ={}) == []


def test_openai_needs_its_key_variable_and_says_how_to_set_it():
    problems = missing_requirements(openai_only(), environ={})
    assert len(problems) == 1
    assert "OPENAI_API_KEY" in problems[0] and "is not set" in problems[0]
    assert "export OPENAI_API_KEY=EMPTY" in problems[0] and "vLLM" in problems[0]
    assert missing_requirements(openai_only(), environ=KEY) == []


def test_an_empty_key_is_missing_too_and_the_variable_name_is_the_configured_one():
    problems = missing_requirements(openai_only(**{"llm.api_key_env": "MY_KEY"}),
                                    environ={"MY_KEY": "", **KEY})
    assert len(problems) == 1 and "MY_KEY" in problems[0] and "is empty" in problems[0]


def test_an_empty_variable_name_reads_no_key():
    assert missing_requirements(openai_only(**{"llm.api_key_env": ""}), environ={}) == []


@pytest.mark.parametrize("url, fragment", [
    ("", "llm.base_url is empty"),
    ("   ", "llm.base_url is empty"),
    ("gpu-box:8000/v1", "not an http(s) URL"),
    ("ftp://gpu-box/v1", "not an http(s) URL"),
    ("http://", "not an http(s) URL"),
])
def test_a_missing_or_malformed_endpoint_is_named(url, fragment):
    problems = missing_requirements(openai_only(**{"llm.base_url": url}), environ=KEY)
    assert len(problems) == 1 and fragment in problems[0]


def test_an_unreachable_endpoint_is_not_checked_here():
    """Nothing listens on port 9 (discard): still no problem, the query will say so."""
    assert missing_requirements(openai_only(**{"llm.base_url": "http://127.0.0.1:9/v1"}),
                                environ=KEY) == []


def test_each_problem_is_one_line():
    config = Config.from_params({"llm.base_url": "", "segmenter.checkpoint": "/nowhere/sam3.pt"})
    problems = missing_requirements(config, environ={})
    assert len(problems) == 3 and all("\n" not in p for p in problems)


@needs_sam3
def test_sam3_with_a_missing_checkpoint_file(tmp_path):
    path = tmp_path / "nowhere" / "sam3.pt"
    problems = missing_requirements(sam3_only(**{"segmenter.checkpoint": str(path)}))
    assert len(problems) == 1 and str(path) in problems[0] and "does not exist" in problems[0]


@needs_sam3
def test_sam3_with_an_existing_checkpoint_file_passes_without_reading_it(tmp_path):
    path = tmp_path / "sam3.pt"
    path.write_bytes(b"not read here")  # reading it is the load's job (a clear error there)
    assert missing_requirements(sam3_only(**{"segmenter.checkpoint": str(path)})) == []


@needs_sam3
def test_sam3_random_weights_need_no_checkpoint(no_hub):
    assert missing_requirements(sam3_only(**{"segmenter.random_weights": True})) == []


@needs_sam3
def test_sam3_random_weights_and_a_checkpoint_contradict(tmp_path):
    problems = missing_requirements(sam3_only(**{"segmenter.random_weights": True,
                                                 "segmenter.checkpoint": str(tmp_path)}))
    assert len(problems) == 1 and "choose one" in problems[0]


@needs_sam3
def test_sam3_weights_in_the_hugging_face_cache_are_enough(no_hub, monkeypatch):
    _cache_sam3(no_hub)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # offline, no token: the cache alone suffices
    assert missing_requirements(sam3_only()) == []


@needs_sam3
def test_sam3_not_cached_and_offline_says_how_to_get_the_weights(no_hub, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_TOKEN", "hf_test")
    problems = missing_requirements(sam3_only())
    assert len(problems) == 1
    assert "HF_HUB_OFFLINE" in problems[0] and "hf download facebook/sam3" in problems[0]


@needs_sam3
def test_sam3_not_cached_with_a_token_is_left_to_the_download(no_hub, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_test")
    assert missing_requirements(sam3_only()) == []


@needs_sam3
def test_sam3_bad_bpe_path_is_named(tmp_path):
    problems = missing_requirements(sam3_only(**{"segmenter.random_weights": True,
                                                 "segmenter.bpe_path": str(tmp_path / "x.gz")}))
    assert len(problems) == 1 and "BPE vocabulary" in problems[0]


@pytest.mark.skipif(SAM3_INSTALLED, reason="torch and sam3 are installed here")
def test_sam3_not_installed_says_where_to_read_how():
    problems = missing_requirements(sam3_only(**{"segmenter.random_weights": True}))
    assert len(problems) == 1 and "not installed" in problems[0]
    assert "docs/sam3.md" in problems[0]


def _cache_sam3(hub_cache: Path) -> None:
    """The Hugging Face cache layout of facebook/sam3's sam3.pt (refs/main -> a snapshot)."""
    revision = "0" * 40
    repo = hub_cache / "models--facebook--sam3"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(revision)
    snapshot = repo / "snapshots" / revision
    snapshot.mkdir(parents=True)
    (snapshot / "sam3.pt").write_bytes(b"weights")


# --- issue 25: no credentials in llm.base_url (any peer can read a parameter) ------------------
@pytest.mark.parametrize("url", [
    "http://operator7:pass-hunter2@llm.example:8000/v1",
    "http://token@llm.example/v1",
    "https://llm.example/v1?api-key=K-9f3a7c1e",
    "https://llm.example/v1?x=1&access_token=T0k3n",
    "https://llm.example/v1#sig=abcd",
])
def test_credentials_in_the_endpoint_are_refused_with_the_way_to_pass_the_key(url):
    problem = base_url_credentials_problem(url, "MY_KEY")
    assert problem is not None and "carries credentials" in problem
    assert "put the API key in the environment variable named by llm.api_key_env " \
        "(export MY_KEY=<key>)" in problem
    assert all(part not in problem for part in ("pass-hunter2", "K-9f3a7c1e", "T0k3n", "abcd"))
    no_variable = base_url_credentials_problem(url, "")
    assert "set llm.api_key_env to OPENAI_API_KEY and export OPENAI_API_KEY=<key>" in no_variable


@pytest.mark.parametrize("url", ["http://127.0.0.1:8000/v1", "https://api.openai.com/v1",
                                 "http://gpu-box:8000/v1?model=x", ""])
def test_an_endpoint_without_credentials_passes(url):
    assert base_url_credentials_problem(url, "OPENAI_API_KEY") is None


@pytest.mark.parametrize("command", ["run", "eval", "concepts"])
def test_the_commands_refuse_credentials_in_the_endpoint_with_exit_2(command, tmp_path, capsys):
    from sam3_agent_ros.cli import main

    url = attack_url("127.0.0.1:9")
    inputs = {"run": ["--image", str(EXAMPLE), "--query", "the cup"],
              "eval": ["--dataset", str(TABLETOP), "--out", str(tmp_path / "eval")],
              "concepts": ["--image", str(EXAMPLE), "--concepts", "cup"]}[command]
    status = main([command, *inputs, "-p", f"llm.base_url:={url}",
                   "-p", "segmenter.backend:=color"])
    captured = capsys.readouterr()
    assert status == 2 and captured.out == ""
    (line,) = captured.err.strip().splitlines()
    assert line.startswith(f"sam3-agent {command}: llm.base_url http://***@127.0.0.1:9/v1?"
                           "api-key=*** carries credentials")
    assert "(export OPENAI_API_KEY=<key>)" in line and leaks(line) == []
    assert not (tmp_path / "eval").exists()


def test_the_backends_name_the_engine_the_segmenter_reports():
    """CONTRACTS §13: the result's backends name SAM 3's engine and the providers really used;
    a segmenter that says nothing (colour, plugins) leaves config.backends as they are."""
    from types import SimpleNamespace

    from sam3_agent_ros.backends import describe_backends, make_segmenter

    config = Config.from_params({})
    onnx = SimpleNamespace(engine_info={"segmenter_engine": "onnxruntime",
                                        "segmenter_providers": "CPUExecutionProvider"})
    assert describe_backends(config, onnx) == {
        "llm": "openai", "segmenter": "sam3", "segmenter_engine": "onnxruntime",
        "segmenter_providers": "CPUExecutionProvider"}
    offline = Config.from_params(dict(OFFLINE_BACKENDS))
    assert describe_backends(offline, make_segmenter(offline)) == {"llm": "offline",
                                                                  "segmenter": "color"}
    assert describe_backends(config, SimpleNamespace(engine_info="not a mapping")) == \
        config.backends


def test_run_writes_the_segmenter_engine_into_the_result(tmp_path, capsys, monkeypatch):
    """sam3-agent run puts what the segmenter reports into the result's backends."""
    import json

    from sam3_agent_ros import backends
    from sam3_agent_ros.cli import main
    from sam3_agent_ros.segmenters.color import ColorSegmenter

    class Reporting(ColorSegmenter):
        engine_info = {"segmenter_engine": "onnxruntime", "segmenter_providers": "X"}

    monkeypatch.setattr(backends, "make_segmenter", lambda config: Reporting())
    status = main(["run", "--image", str(EXAMPLE), "--query", "the leftmost blue object",
                   "--offline"])
    result = json.loads(capsys.readouterr().out)
    assert status == 0
    assert result["backends"] == {"llm": "offline", "segmenter": "color",
                                  "segmenter_engine": "onnxruntime", "segmenter_providers": "X"}

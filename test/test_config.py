import pytest

from sam3_agent_ros.config import (
    OFFLINE_BACKENDS,
    PARAMETERS,
    PARAMETERS_BY_NAME,
    Config,
    ConfigError,
    backends_of,
    demo_backends_warning,
    load_params_file,
    offline_overrides,
    parse_override,
)


def test_defaults_and_every_parameter_has_a_description():
    config = Config()
    assert config.llm.backend == "openai" and config.agent.max_context_messages == 10
    assert config.segmenter.backend == "sam3" and config.node.query_policy == "preempt"
    assert all(p.description for p in PARAMETERS)
    assert Config.from_params({}) == config


def test_the_real_backends_are_the_defaults_and_the_offline_ones_a_valid_choice():
    assert Config().backends == {"llm": "openai", "segmenter": "sam3"}
    offline = Config.from_params(OFFLINE_BACKENDS)
    assert offline.backends == {"llm": "offline", "segmenter": "color"}
    for name, value in OFFLINE_BACKENDS.items():
        assert value in PARAMETERS_BY_NAME[name].choices and value != PARAMETERS_BY_NAME[
            name].default
    assert offline_overrides() == ["llm.backend:=offline", "segmenter.backend:=color"]
    assert [parse_override(text) for text in offline_overrides()] == list(
        OFFLINE_BACKENDS.items())


def test_backends_name_a_plugin_by_its_spec():
    config = Config.from_params({"segmenter.backend": "pkg.mod:make"})
    assert config.backends == {"llm": "openai", "segmenter": "pkg.mod:make"}
    assert backends_of(config.to_params()) == config.backends


@pytest.mark.parametrize("params, demo", [
    ({}, None),
    ({"segmenter.backend": "pkg.mod:make"}, None),
    (OFFLINE_BACKENDS, ["llm.backend=offline", "segmenter.backend=color"]),
    ({"llm.backend": "offline"}, ["llm.backend=offline"]),
    ({"segmenter.backend": "color"}, ["segmenter.backend=color"]),
])
def test_demo_backends_warning_names_each_demo_backend(params, demo):
    warning = demo_backends_warning(Config.from_params(params).to_params())
    if demo is None:
        assert warning is None
        return
    assert "not from a model" in warning and "\n" not in warning
    for text in demo:
        assert text in warning
    assert ("llm.backend=offline" in warning) == ("llm.backend=offline" in demo)


def test_from_params_coerces_and_validates():
    config = Config.from_params({"agent.max_rounds": "5", "llm.timeout_s": 3,
                                 "autostart": "false", "llm.model": 7})
    assert config.agent.max_rounds == 5 and config.llm.timeout_s == 3.0
    assert config.node.autostart is False and config.llm.model == "7"
    assert Config.from_params(config.to_params()) == config


@pytest.mark.parametrize("params, fragment", [
    ({"llm.modle": "x"}, "did you mean 'llm.model'"),
    ({"llm.backend": "gpt"}, "is not one of"),
    ({"agent.max_rounds": 0}, "below the minimum"),
    ({"agent.max_context_messages": 3}, "below the minimum"),
    ({"agent.examine_concurrency": "many"}, "is not an integer"),
    ({"autostart": "maybe"}, "not a boolean"),
    ({"depth.min_m": 5.0, "depth.max_m": 1.0}, "below depth.max_m"),
    ({"segmenter.backend": "nope"}, "plugin"),
])
def test_invalid_values_are_rejected_with_a_reason(params, fragment):
    with pytest.raises(ConfigError) as info:
        Config.from_params(params)
    assert fragment in str(info.value)


def test_segmenter_plugin_form_is_accepted():
    assert Config.from_params({"segmenter.backend": "pkg.mod:make"}).segmenter.backend == \
        "pkg.mod:make"


def test_params_file_in_ros_shape(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("/**:\n  ros__parameters:\n    agent:\n      max_rounds: 4\n"
                    "sam3_agent:\n  ros__parameters:\n    llm.model: qwen\n    agent:\n"
                    "      max_rounds: 6\nother_node:\n  ros__parameters: {x: 1}\n")
    params = load_params_file(path)
    assert params == {"agent.max_rounds": 6, "llm.model": "qwen"}


@pytest.mark.parametrize("text, fragment", [
    ("llm: [", "not valid YAML"), ("- 1", "expected"), ("foo:\n  ros__parameters: {}", "no"),
    ("sam3_agent: {a: 1}", "no 'ros__parameters'"),
])
def test_bad_params_files(tmp_path, text, fragment):
    path = tmp_path / "p.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_params_file(path)
    assert fragment in str(info.value)


def test_missing_params_file():
    with pytest.raises(ConfigError, match="cannot read"):
        load_params_file("/nonexistent/p.yaml")


def test_overrides():
    assert parse_override("llm.model:=qwen3") == ("llm.model", "qwen3")
    assert parse_override("agent.max_rounds:=3") == ("agent.max_rounds", 3)
    assert parse_override("segmenter.checkpoint:=") == ("segmenter.checkpoint", "")
    with pytest.raises(ConfigError, match="NAME:=VALUE"):
        parse_override("llm.model=qwen")
    with pytest.raises(ConfigError, match="unknown parameter"):
        parse_override("nope:=1")


def test_concepts_prompts_is_a_list_of_strings_from_every_source(tmp_path):
    assert Config().concepts.prompts == ()  # off by default
    as_list = Config.from_params({"concepts.prompts": ["cup", "red ball"]})
    assert as_list.concepts.prompts == ("cup", "red ball")
    name, value = parse_override('concepts.prompts:="[cup, red ball]"')  # -p on the CLI
    assert Config.from_params({name: value}).concepts.prompts == ("cup", "red ball")
    path = tmp_path / "p.yaml"
    path.write_text("sam3_agent:\n  ros__parameters:\n    concepts:\n      prompts: []\n")
    assert Config.from_params(load_params_file(path)).concepts.prompts == ()
    assert Config.from_params({"concepts.prompts": None}).concepts.prompts == ()  # ROS: `[]`
    assert Config.from_params(as_list.to_params()) == as_list


@pytest.mark.parametrize("prompts, fragment", [
    ("cup", "is not a list of strings"),
    ([1, 2], "is not a list of strings"),
    ([f"c{i}" for i in range(9)], "9 concepts, more than concepts.max_prompts (8)"),
    (["cup", " "], "concept 2 is empty"),
    (["x" * 101], "101 characters, more than concepts.max_prompt_chars (100)"),
    (["cup\nbottle"], "control characters"),
    (["cup", "Cup "], "'Cup' is listed twice"),
])
def test_concepts_prompts_are_bounded(prompts, fragment):
    with pytest.raises(ConfigError) as info:
        Config.from_params({"concepts.prompts": prompts})
    assert fragment in str(info.value)
    bigger = {"concepts.prompts": [f"c{i}" for i in range(9)], "concepts.max_prompts": 9}
    assert len(Config.from_params(bigger).concepts.prompts) == 9


def test_only_the_concept_list_and_rate_apply_at_once():
    live = {p.name for p in PARAMETERS if p.live}
    assert live == {"concepts.prompts", "concepts.rate_hz"}
    assert PARAMETERS_BY_NAME["concepts.max_prompts"].read_only
    assert PARAMETERS_BY_NAME["concepts.max_prompt_chars"].read_only

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


# --- issue 25: no value can crash, freeze or bloat whoever validates it ------------------------
DEEP = "[" * 2000  # yaml.safe_load raised RecursionError (the node died)
ALIAS_BOMB = ("a: &a [x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
              "c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\n"
              "e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: [*e,*e,*e,*e,*e,*e,*e,*e,*e]")


@pytest.mark.parametrize("text", ["[cup, red ball]", DEEP, ALIAS_BOMB, "[" * 600_000],
                         ids=["list-text", "deep", "alias-bomb", "600k"])
def test_a_string_is_never_read_as_a_concept_list(text):
    """concepts.prompts is a string array: a string (a peer's set) is refused, never parsed."""
    with pytest.raises(ConfigError, match="is not a list of strings") as info:
        Config.from_params({"concepts.prompts": text})
    assert len(str(info.value)) < 200


def test_concepts_are_bounded_on_the_raw_text_padding_included():
    padded = " " * 1_000_000 + "cup" + " " * 1_000_000
    with pytest.raises(ConfigError) as info:
        Config.from_params({"concepts.prompts": [padded]})
    assert "concept 1 has 2000003 characters, more than concepts.max_prompt_chars (100)" \
        in str(info.value)
    with pytest.raises(ConfigError, match="100000 concepts, more than"):
        Config.from_params({"concepts.prompts": ["x"] * 100_000})


@pytest.mark.parametrize("name", ["llm.temperature", "max_frame_age_s", "llm.timeout_s"])
@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_numbers_must_be_finite(name, value):
    with pytest.raises(ConfigError, match="is not a finite number"):
        Config.from_params({name: value})


def test_a_string_parameter_is_bounded():
    assert Config.from_params({"llm.model": "m" * 4096}).llm.model == "m" * 4096
    with pytest.raises(ConfigError, match="4097 characters, more than the 4096"):
        Config.from_params({"llm.model": "m" * 4097})
    with pytest.raises(ConfigError, match="1000000 characters"):
        Config.from_params({"segmenter.device": " " * 1_000_000})


@pytest.mark.parametrize("text, expected", [
    ('concepts.prompts:=[cup, "red, ball"]', ["cup", "red, ball"]),
    ('concepts.prompts:="[yellow object]"', ["yellow object"]),  # quoted once, no shell
    ("concepts.prompts:=[]", []),
    ("concepts.prompts:=", []),
    ("concepts.prompts:=[1, true]", ["1", "true"]),  # each entry is its text
])
def test_a_list_on_the_command_line(text, expected):
    assert parse_override(text) == ("concepts.prompts", expected)


@pytest.mark.parametrize("text, fragment", [
    ("concepts.prompts:=" + DEEP, "is not a list"),
    ("concepts.prompts:=[[a], b]", "is not a flat list of strings"),
    ("concepts.prompts:=" + "[" + ", ".join(["a"] * 40_000) + "]", "more than 65536"),
    ("concepts.prompts:=cup", "is not a flat list of strings"),
    ("concepts.prompts:=" + ALIAS_BOMB, "is not a flat list of strings"),
])
def test_a_bad_list_on_the_command_line_is_one_clear_error(text, fragment):
    with pytest.raises(ConfigError, match=fragment):
        parse_override(text)


def test_a_deep_scalar_on_the_command_line_stays_text():
    assert parse_override("llm.model:=" + DEEP) == ("llm.model", DEEP)
    with pytest.raises(ConfigError, match="more than the 4096"):
        Config.from_params(dict([parse_override("llm.model:=" + "[" * 100_000)]))


def test_when_a_runtime_change_applies_comes_from_the_table():
    assert PARAMETERS_BY_NAME["concepts.prompts"].applies == "now"
    assert PARAMETERS_BY_NAME["agent.max_rounds"].applies == "configure"
    assert PARAMETERS_BY_NAME["llm.base_url"].applies == "restart"
    assert {p.applies for p in PARAMETERS} == {"now", "configure", "restart"}


def test_a_refusal_never_repeats_a_huge_value():
    for value in (["x" * 1_000_000] * 50 + [1], "y" * 1_000_000):
        for name in ("concepts.prompts", "llm.protocol", "agent.max_rounds"):
            with pytest.raises(ConfigError) as info:
                Config.from_params({name: value})
            assert len(str(info.value)) < 300, name


def test_every_parameter_is_exactly_one_typed_field_of_its_section():
    """The written-out section dataclasses match PARAMETERS: one field per parameter, in the
    section of its prefix (un-prefixed: NodeConfig), with the parameter's type and default."""
    import dataclasses
    import typing

    from sam3_agent_ros.config import SECTIONS, NodeConfig

    sections = {**SECTIONS, "node": NodeConfig}
    assert {f.name for f in dataclasses.fields(Config)} == set(sections)
    seen = set()
    for prefix, section in sections.items():
        assert dataclasses.is_dataclass(section) and section.__dataclass_params__.frozen
        hints = typing.get_type_hints(section)
        for f in dataclasses.fields(section):
            name = f.name if prefix == "node" else f"{prefix}.{f.name}"
            assert name in PARAMETERS_BY_NAME, f"{section.__name__}.{f.name} is no parameter"
            param = PARAMETERS_BY_NAME[name]
            expected = tuple[str, ...] if param.type is tuple else param.type
            assert hints[f.name] == expected, name
            assert f.default == param.default and type(f.default) is param.type, name
            seen.add(name)
    assert seen == set(PARAMETERS_BY_NAME) and len(seen) == len(PARAMETERS)


# --- issue 27: the robot's frame -----------------------------------------------------------------
def test_the_target_frame_parameters_are_typed_and_where_things_go_is_read_only():
    config = Config.from_params({"target_frame": "base_link", "tf.timeout_s": 0.5,
                                 "depth.cloud_max_points": 500})
    assert config.node.target_frame == "base_link"
    assert config.tf.timeout_s == 0.5 and config.depth.cloud_max_points == 500
    defaults = Config()
    assert (defaults.node.target_frame, defaults.tf.timeout_s,
            defaults.depth.cloud_max_points) == ("", 0.2, 20000)
    assert PARAMETERS_BY_NAME["target_frame"].read_only
    with pytest.raises(ConfigError):
        Config.from_params({"depth.cloud_max_points": 0})


# --- issue 36: the grasp scene -------------------------------------------------------------------
def test_the_grasp_scene_parameters_are_typed_bounded_and_dynamic():
    defaults = Config()
    assert (defaults.scene.enabled, defaults.scene.crop_scale, defaults.scene.crop_min_m) == (
        True, 2.0, 0.3)
    assert (defaults.grasp.max_width_m, defaults.grasp.clearance_m) == (0.08, 0.01)
    config = Config.from_params({"scene.enabled": False, "scene.crop_scale": 3,
                                 "scene.crop_min_m": 0.5, "grasp.max_width_m": 0.14,
                                 "grasp.clearance_m": 0.0})
    assert config.scene.enabled is False and config.scene.crop_scale == 3.0
    assert type(config.scene.crop_scale) is float and config.scene.crop_min_m == 0.5
    assert (config.grasp.max_width_m, config.grasp.clearance_m) == (0.14, 0.0)
    for name, bad in (("scene.crop_scale", 0.5), ("scene.crop_min_m", -0.1),
                      ("grasp.max_width_m", 0.0), ("grasp.clearance_m", -0.01),
                      ("scene.enabled", "maybe"), ("grasp.clearance_m", float("nan"))):
        with pytest.raises(ConfigError):
            Config.from_params({name: bad})
    for name in ("scene.enabled", "scene.crop_scale", "scene.crop_min_m", "grasp.max_width_m",
                 "grasp.clearance_m"):
        assert not PARAMETERS_BY_NAME[name].read_only and PARAMETERS_BY_NAME[name].description

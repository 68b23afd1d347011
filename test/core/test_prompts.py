from sam3_agent_ros.core.prompts import CALL_FORMAT_PLACEHOLDER, Prompts, load_prompts


def test_the_system_prompt_states_the_call_format_of_each_protocol():
    prompts = load_prompts()
    text, tools = prompts.system_for("text"), prompts.system_for("tools")
    assert CALL_FORMAT_PLACEHOLDER not in text and CALL_FORMAT_PLACEHOLDER not in tools
    assert '<tool>{"name": "<tool name>", "parameters": {...}}</tool>' in text
    assert "function-calling" in tools and "<tool>" not in tools


def test_a_custom_prompt_without_the_placeholder_is_used_as_it_is():
    custom = Prompts(system="Only segment cups.", verifier="v")
    assert custom.system_for("tools") == "Only segment cups."

"""Loads the system and verifier prompts from prompts/ (share directory or source tree)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

PACKAGE = "sam3_agent_ros"


class PromptsError(RuntimeError):
    pass


CALL_FORMAT_PLACEHOLDER = "{{call_format}}"
# How a tool call is written, per llm.protocol; replaces the placeholder in system.md.
CALL_FORMATS = {
    "text": ('Write the tool call as\n\n<tool>{"name": "<tool name>", "parameters": {...}}</tool>'
             "\n\nOnly the first tool call counts; write nothing after it."),
    "tools": ("Make the tool call with the function-calling interface (one function call per "
              "reply); do not write tool calls as text. Only the first call of a reply runs."),
}


@dataclass(frozen=True)
class Prompts:
    system: str
    verifier: str

    def system_for(self, protocol: str) -> str:
        """The system prompt with the call format of ``llm.protocol`` (a custom prompt without
        the placeholder is used as it is)."""
        return self.system.replace(CALL_FORMAT_PLACEHOLDER, CALL_FORMATS[protocol])


def prompts_dir(configured: str = "") -> Path:
    """``agent.prompts_dir`` if set, else the source tree's prompts/, else the share directory."""
    if configured:
        return Path(configured).expanduser()
    source = Path(__file__).resolve().parents[2] / "prompts"
    if (source / "system.md").is_file():
        return source
    try:
        from ament_index_python.packages import get_package_share_directory

        return Path(get_package_share_directory(PACKAGE)) / "prompts"
    except Exception:  # not installed with colcon, or ament_index missing
        pass
    import sys

    return Path(sys.prefix) / "share" / PACKAGE / "prompts"


def load_prompts(configured_dir: str = "") -> Prompts:
    directory = prompts_dir(configured_dir)
    texts = {}
    for name in ("system", "verifier"):
        path = directory / f"{name}.md"
        try:
            texts[name] = path.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise PromptsError(f"cannot read prompt {path}: {exc.strerror} (set "
                               "agent.prompts_dir to a directory with system.md and "
                               "verifier.md)") from None
    return Prompts(**texts)

"""Pure parsing of model replies: the ``<tool>{json}</tool>`` protocol (CONTRACTS §1) and verdicts.

Every way a reply can be wrong raises ``ModelMistake`` whose text tells the model how to fix it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from sam3_agent_ros.core.errors import ModelMistake

SEGMENT = "segment_phrase"
EXAMINE = "examine_each_mask"
SELECT = "select_masks_and_return"
REPORT_NO_MASK = "report_no_mask"

# name -> {parameter: required python type}
TOOL_SCHEMAS: dict[str, dict[str, type]] = {
    SEGMENT: {"text_prompt": str},
    EXAMINE: {},
    SELECT: {"final_answer_masks": list},
    REPORT_NO_MASK: {},
}

_TOOL_OPEN = "<tool>"
_TOOL_CLOSE = "</tool>"
_THINK_BLOCK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_VERDICT = re.compile(r"<verdict>\s*(accept|reject)\s*</verdict>", re.IGNORECASE)
_FORMAT_HINT = ('Reply with your reasoning, then exactly one tool call such as '
                '<tool>{"name": "segment_phrase", "parameters": {"text_prompt": "red mug"}}</tool>')


@dataclass(frozen=True)
class ToolCall:
    name: str
    parameters: dict[str, Any]


def kept_text(reply: str) -> str:
    """The part of a reply kept in the conversation: everything up to the first ``</tool>``."""
    end = reply.find(_TOOL_CLOSE)
    return reply if end < 0 else reply[: end + len(_TOOL_CLOSE)]


def parse_tool_call(reply: str) -> ToolCall:
    """Extract and validate the first tool call of a reply."""
    text = _THINK_BLOCK.sub("", reply)
    start = text.find(_TOOL_OPEN)
    if start < 0:
        raise ModelMistake(f"Your reply contains no <tool> call. {_FORMAT_HINT}")
    end = text.find(_TOOL_CLOSE, start)
    if end < 0:
        raise ModelMistake(f"Your <tool> call is not closed with </tool>. {_FORMAT_HINT}")
    body = text[start + len(_TOOL_OPEN): end].strip()
    try:
        payload = json.loads(body)
    except json.JSONDecodeError as exc:
        raise ModelMistake(f"The text inside <tool>...</tool> is not valid JSON ({exc.msg} at "
                           f"position {exc.pos}). {_FORMAT_HINT}") from None
    if not isinstance(payload, dict):
        raise ModelMistake('The tool call must be a JSON object '
                           '{"name": ..., "parameters": {...}}.')
    name = payload.get("name")
    if name not in TOOL_SCHEMAS:
        raise ModelMistake(f"Unknown tool {name!r}. Available tools: {', '.join(TOOL_SCHEMAS)}.")
    extra_keys = set(payload) - {"name", "parameters"}
    if extra_keys:
        raise ModelMistake(f"Unexpected keys {sorted(extra_keys)} in the tool call: use only "
                           '"name" and "parameters".')
    parameters = payload.get("parameters", {})
    if parameters is None:
        parameters = {}
    if not isinstance(parameters, dict):
        raise ModelMistake(f'"parameters" of {name} must be a JSON object.')
    _check_parameters(name, parameters)
    return ToolCall(name, parameters)


def _check_parameters(name: str, parameters: dict[str, Any]) -> None:
    schema = TOOL_SCHEMAS[name]
    signature = _signature(name)
    missing = [key for key in schema if key not in parameters]
    extra = [key for key in parameters if key not in schema]
    if missing or extra:
        parts = []
        if missing:
            parts.append(f"missing {missing}")
        if extra:
            parts.append(f"unexpected {extra}")
        raise ModelMistake(f"Wrong parameters for {name} ({'; '.join(parts)}). Use {signature}.")
    for key, kind in schema.items():
        if not isinstance(parameters[key], kind):
            raise ModelMistake(f"Parameter {key!r} of {name} must be a JSON "
                               f"{_json_type(kind)}. Use {signature}.")
    if name == SEGMENT and not parameters["text_prompt"].strip():
        raise ModelMistake(f"text_prompt must be a non-empty noun phrase. Use {signature}.")
    if name == SELECT:
        ids = parameters["final_answer_masks"]
        if not ids:
            raise ModelMistake("final_answer_masks is empty: to answer that nothing matches, call "
                               "report_no_mask instead.")
        if not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
            raise ModelMistake(f"final_answer_masks must be a list of integer mask ids, got {ids}.")


def _signature(name: str) -> str:
    examples = {SEGMENT: '{"text_prompt": "<short noun phrase>"}', EXAMINE: "{}",
                SELECT: '{"final_answer_masks": [1, 2]}', REPORT_NO_MASK: "{}"}
    return f'<tool>{{"name": "{name}", "parameters": {examples[name]}}}</tool>'


def _json_type(kind: type) -> str:
    return {str: "string", list: "array", dict: "object"}.get(kind, kind.__name__)


def parse_verdict(reply: str) -> bool | None:
    """True for Accept, False for Reject, None when the reply has no verdict tag.

    The last verdict wins (a model may quote the format before answering)."""
    found = _VERDICT.findall(_THINK_BLOCK.sub("", reply))
    if not found:
        return None
    return found[-1].lower() == "accept"


def normalize_prompt(text: str) -> str:
    """Key for duplicate detection: case, surrounding space and inner runs of space ignored."""
    return " ".join(text.lower().split()).strip(" .")

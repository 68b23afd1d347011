"""The page's own script (console/page.py) run under Node.js with a stand-in DOM: what the
Result panel writes for a result view (views.result_view). Skipped without ``node``."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

from sam3_agent_ros.console import page, views

NODE = shutil.which("node")

# Just enough of a browser for the script to load and render: every element is one plain object.
DOM = """
const elements = {};
function element() { return {textContent: "", value: "auto", src: "", className: "",
  children: [], addEventListener() {}, removeAttribute() {},
  replaceChildren(...items) { this.children = items; }}; }
globalThis.document = {getElementById: (id) => (elements[id] = elements[id] || element()),
  createElement: () => element(), activeElement: null};
globalThis.setInterval = () => 0; globalThis.setTimeout = () => 0;
globalThis.location = {protocol: "http:", host: "localhost", search: ""};
globalThis.WebSocket = class { constructor() { this.readyState = 0; } send() {} };
"""


def _script() -> str:
    html = next(value for value in vars(page).values()
                if isinstance(value, str) and "<script" in value)
    return "\n".join(re.findall(r"<script[^>]*>(.*?)</script>", html, re.S))


def masks_written(view: dict) -> list[str]:
    """The lines the Result panel lists for ``view``."""
    code = (DOM + _script() + f"\nrender.result({json.dumps(view)});\n"
            "console.log(JSON.stringify(elements.masks.children.map((c) => c.textContent)));\n")
    done = subprocess.run([NODE or "node", "-e", code], capture_output=True, text=True,
                          timeout=30)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(NODE is None, reason="no node (Node.js) to run the page's script")
def test_the_result_panel_shows_the_best_grasp_or_why_there_is_none():
    pose = {"position": {"x": -0.12, "y": -0.22, "z": 0.98},
            "orientation": {"x": 0.16, "y": -0.69, "z": 0.16, "w": 0.69}}
    result = {"query_id": "q", "query": "the smallest object", "status": "succeeded",
              "frame_id": "camera_color_optical_frame",
              "masks": [{"id": 1, "score": 0.9, "bbox": [1, 2, 3, 4],
                         "position": {"x": -0.12, "y": -0.22, "z": 0.97},
                         "grasps": [{"pose": pose, "width": 0.05715, "score": 0.5905},
                                    {"pose": pose, "width": 0.05717, "score": 0.5904}]},
                        {"id": 2, "score": 0.8, "bbox": [1, 2, 3, 4], "grasps": [],
                         "grasp_error": "no side of the object fits the gripper"},
                        {"id": 3, "score": 0.7, "bbox": [1, 2, 3, 4]}]}
    first, second, third = masks_written(views.result_view(result))
    assert first.endswith(", best grasp: width 0.057 m, score 0.59, at (-0.120, -0.220, "
                          "0.980) m (2 clear)"), first
    assert second.endswith(", no grasp: no side of the object fits the gripper"), second
    assert "grasp" not in third, third

"""The geometry tests' shared scenes (scenes.py), rendered once per test module."""

from __future__ import annotations

import pytest

from sam3_agent_demo.scene import render_scene
from test.geometry.scenes import CENTRED, SCENES, render


@pytest.fixture(scope="module")
def scene():
    return render(CENTRED)


@pytest.fixture(scope="module")
def frames():
    return {name: render_scene(scene) for name, scene in SCENES.items()}

"""One SAM 3 model (random weights, CPU) for every slow_sam3 test of the session: building it
costs 15-75 s and ~4 GB, so the torch test (test_sam3_cpu.py) and the ONNX Runtime test
(test_sam3_onnx.py) share it, and the torch segmenter with its cached frame."""

from __future__ import annotations

import time

import pytest

from test.segmenters.sam3_shared import FRAME, sam3_cpu_config


@pytest.fixture(scope="session")
def sam3_loaded():
    """(the LoadedSam3, seconds its build took)."""
    from sam3_agent_ros.segmenters.sam3_model import load_sam3

    started = time.perf_counter()
    loaded = load_sam3(sam3_cpu_config())
    yield loaded, time.perf_counter() - started
    loaded.release()


@pytest.fixture(scope="session")
def sam3(sam3_loaded):
    """(the torch segmenter on the shared model, seconds the model's build took); closed at the
    end of the session, and then refuses."""
    from sam3_agent_ros.core.errors import SegmenterError
    from sam3_agent_ros.segmenters.sam3 import Sam3Segmenter

    loaded, build_s = sam3_loaded
    segmenter = Sam3Segmenter(sam3_cpu_config(), loaded=loaded)
    yield segmenter, build_s
    segmenter.close()
    with pytest.raises(SegmenterError, match="closed"):
        segmenter.segment(FRAME, "anything")

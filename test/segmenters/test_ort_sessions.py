"""Which ONNX Runtime execution providers SAM 3's engine asks for (CONTRACTS §13)."""

from __future__ import annotations

from sam3_agent_ros.segmenters.ort_sessions import CPU, CUDA, TENSORRT, choose_providers

ALL = [TENSORRT, CUDA, CPU]


def names(chosen):
    return [name for name, _ in chosen]


def test_cpu_device_keeps_the_cpu_only_whatever_the_build_has():
    assert choose_providers("cpu", ALL, fp16=False) == [(CPU, {})]


def test_gpu_device_asks_tensorrt_then_cuda_then_cpu_on_its_index():
    chosen = choose_providers("cuda:1", ALL, fp16=True, cache_dir="/tmp/trt")
    assert names(chosen) == [TENSORRT, CUDA, CPU]
    trt = chosen[0][1]
    assert trt["device_id"] == 1 and trt["trt_fp16_enable"] is True
    assert trt["trt_engine_cache_enable"] and trt["trt_engine_cache_path"] == "/tmp/trt"
    assert chosen[1] == (CUDA, {"device_id": 1})
    assert choose_providers("cuda:0", ALL, fp16=False)[0][1] == {"device_id": 0,
                                                                 "trt_fp16_enable": False}


def test_only_the_providers_this_build_has():
    assert names(choose_providers("cuda:0", [CUDA, CPU], fp16=True)) == [CUDA, CPU]
    assert names(choose_providers("cuda:0", [CPU], fp16=True)) == [CPU]

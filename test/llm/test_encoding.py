import gc
import threading

import numpy as np
import pytest

from sam3_agent_ros.core.types import ImagePart, Message, NativeToolCall
from sam3_agent_ros.llm.encoding import (
    ImageEncoder,
    downscale,
    encode_data_url,
    to_openai_messages,
)
from test.fakes.scripted_server import decode_image


def solid(height, width, rgb=(200, 30, 40)):
    image = np.zeros((height, width, 3), np.uint8)
    image[:] = rgb
    return image


@pytest.mark.parametrize("shape, max_side, expected", [
    ((1080, 1920), 1008, (567, 1008)),
    ((1920, 1080), 1008, (1008, 567)),
    ((480, 640), 1008, (480, 640)),  # never upscaled
    ((1000, 1000), 100, (100, 100)),
    ((3, 4000), 64, (1, 64)),  # at least one pixel
])
def test_downscale_keeps_aspect_and_bounds_longest_side(shape, max_side, expected):
    assert downscale(solid(*shape), max_side).shape[:2] == expected


def test_jpeg_data_url_round_trip_keeps_rgb_order():
    url = encode_data_url(solid(40, 60, (220, 20, 30)))
    assert url.startswith("data:image/jpeg;base64,")
    decoded = decode_image(url)
    assert decoded.shape == (40, 60, 3)
    assert np.abs(decoded.astype(int) - [220, 20, 30]).max() <= 4


def test_png_data_url_is_lossless_and_accepts_grey():
    rng = np.random.default_rng(0)
    image = rng.integers(0, 256, (17, 23, 3), dtype=np.uint8)
    url = encode_data_url(image, "png")
    assert url.startswith("data:image/png;base64,")
    np.testing.assert_array_equal(decode_image(url), image)
    grey = encode_data_url(np.full((5, 5), 128, np.uint8), "png")
    assert decode_image(grey)[0, 0].tolist() == [128, 128, 128]


@pytest.mark.parametrize("bad", [
    np.zeros((4, 4, 3), np.float32),
    np.zeros((4, 4, 4), np.uint8),
    np.zeros((0, 4, 3), np.uint8),
    "not an array",
])
def test_bad_images_raise_value_error(bad):
    with pytest.raises(ValueError):
        encode_data_url(bad)


def test_unknown_format_is_rejected():
    with pytest.raises(ValueError, match="image_format"):
        ImageEncoder(100, image_format="gif")
    with pytest.raises(ValueError, match="image_format"):
        encode_data_url(solid(2, 2), "gif")


def test_encoder_downscales_and_encodes_each_image_once():
    encoder = ImageEncoder(max_side=100)
    frame = ImagePart(solid(300, 600), "frame")
    first = encoder.data_url(frame)
    assert encoder.data_url(frame) is first
    assert encoder.data_url(ImagePart(frame.array, "frame")) is first  # equal part, same array
    assert decode_image(first).shape == (50, 100, 3)
    assert encoder.encode_count == 1
    encoder.data_url(ImagePart(frame.array, "other-key"))
    encoder.data_url(ImagePart(frame.array.copy(), "frame"))  # same key, another array
    assert encoder.encode_count == 3
    encoder.reset()
    encoder.data_url(frame)
    assert encoder.encode_count == 4


def test_encoder_never_serves_a_freed_arrays_url_to_a_new_array():
    encoder = ImageEncoder(max_side=64)
    for value in range(0, 250, 10):  # freed arrays' ids are often reused at once
        part = ImagePart(solid(8, 8, (value, value, value)), "overlay")
        decoded = decode_image(encoder.data_url(part))
        assert abs(int(decoded[0, 0, 0]) - value) <= 3
        del part
        gc.collect()
    assert encoder.encode_count == 25


def test_concurrent_requests_for_one_image_encode_it_once():
    encoder = ImageEncoder(max_side=512)
    frame = ImagePart(np.random.default_rng(1).integers(0, 256, (1080, 1920, 3), np.uint8),
                      "frame")
    urls = []
    barrier = threading.Barrier(8)

    def worker():
        barrier.wait()
        urls.append(encoder.data_url(frame))

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(urls) == 8 and len(set(urls)) == 1
    assert encoder.encode_count == 1


def test_to_openai_messages_shapes():
    encoder = ImageEncoder(max_side=32)
    frame = ImagePart(solid(10, 20), "frame")
    messages = [
        Message.text("system", "you are a planner"),
        Message("user", (frame, "find the cup", "second line")),
        Message.text("assistant", "<tool>{}</tool>"),
        Message.text("user", "only text"),
    ]
    converted = to_openai_messages(messages, encoder)
    assert converted[0] == {"role": "system", "content": "you are a planner"}
    assert converted[1]["role"] == "user"
    parts = converted[1]["content"]
    assert [p["type"] for p in parts] == ["image_url", "text", "text"]
    assert parts[0]["image_url"]["url"].startswith("data:image/jpeg;base64,")
    assert parts[1] == {"type": "text", "text": "find the cup"}
    assert converted[2] == {"role": "assistant", "content": "<tool>{}</tool>"}
    assert converted[3] == {"role": "user", "content": "only text"}


def test_to_openai_messages_rejects_images_outside_user_messages_and_unknown_roles():
    encoder = ImageEncoder(max_side=32)
    with pytest.raises(ValueError, match="assistant"):
        to_openai_messages([Message("assistant", (ImagePart(solid(2, 2), "x"),))], encoder)
    with pytest.raises(ValueError, match="role"):
        to_openai_messages([Message.text("function", "x")], encoder)
    with pytest.raises(ValueError, match="tool"):
        to_openai_messages([Message("tool", (ImagePart(solid(2, 2), "x"),), tool_call_id="c")],
                           encoder)


def test_native_calls_and_tool_messages_keep_their_ids():
    call = NativeToolCall("call_1", "segment_phrase", '{"text_prompt": "cup"}')
    converted = to_openai_messages([Message("assistant", ("",), tool_calls=(call,)),
                                    Message("tool", ("found 2",), tool_call_id="call_1")],
                                   ImageEncoder(max_side=32))
    assert converted == [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "segment_phrase", "arguments": '{"text_prompt": "cup"}'}}]},
        {"role": "tool", "content": "found 2", "tool_call_id": "call_1"}]

"""inputs.py: image files read with a clear reason, output folders checked before any work."""

from __future__ import annotations

import pytest

from sam3_agent_ros.inputs import prepare_out_dir, read_rgb


def test_a_directory_as_image_says_it_is_a_directory(tmp_path):
    with pytest.raises(ValueError, match="is a directory"):
        read_rgb(tmp_path)


def test_a_missing_image_is_no_such_file(tmp_path):
    with pytest.raises(ValueError, match="no such file"):
        read_rgb(tmp_path / "missing.png")


def test_prepare_out_dir_creates_the_folder_and_its_parents(tmp_path):
    out = tmp_path / "a" / "b"
    assert prepare_out_dir(out) == out
    assert out.is_dir() and list(out.iterdir()) == []  # the write probe left nothing behind


def test_an_out_dir_that_is_a_file_names_the_path_and_the_reason(tmp_path):
    taken = tmp_path / "taken"
    taken.write_text("x")
    with pytest.raises(ValueError) as caught:
        prepare_out_dir(taken)
    assert str(taken) in str(caught.value) and "not a directory" in str(caught.value)


def test_an_out_dir_under_a_file_names_the_os_error(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError) as caught:
        prepare_out_dir(tmp_path / "file" / "out")
    message = str(caught.value)
    assert str(tmp_path / "file" / "out") in message and "Not a directory" in message

"""sam3-agent export-engine: what it refuses in milliseconds, before building anything (the
export itself: test/segmenters/test_sam3_onnx.py and test_engine_export.py)."""

from __future__ import annotations

import importlib.util

from sam3_agent_ros.cli import main


def test_it_needs_an_out_folder(capsys):
    try:
        main(["export-engine"])
    except SystemExit as exc:
        assert exc.code == 2
    assert "--out" in capsys.readouterr().err


def test_only_sam3_has_an_engine(tmp_path, capsys):
    assert main(["export-engine", "--out", str(tmp_path / "e"), "--offline"]) == 2
    assert "only 'sam3' has an engine to export" in capsys.readouterr().err
    assert not (tmp_path / "e").exists()


def test_bad_parameters_and_missing_weights_are_usage_errors(tmp_path, capsys):
    assert main(["export-engine", "--out", str(tmp_path / "e"), "-p",
                 "segmenter.nope:=1"]) == 2
    assert "segmenter.nope" in capsys.readouterr().err
    missing = tmp_path / "sam3.pt"
    assert main(["export-engine", "--out", str(tmp_path / "e"), "-p",
                 f"segmenter.checkpoint:={missing}"]) == 2
    err = capsys.readouterr().err
    if all(importlib.util.find_spec(name) for name in ("torch", "sam3")):
        assert f"SAM 3 checkpoint {missing} does not exist" in err
    else:  # the ROS-free venvs: no torch
        assert "SAM 3 needs" in err and "not installed" in err
    assert err.count("\n") == 1
    assert not (tmp_path / "e").exists()

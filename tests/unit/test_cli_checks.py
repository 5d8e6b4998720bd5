"""Arguments and limits the commands refuse up front, with one readable line: ids that are not integers, ids past
2^31, non-UTF-8 text, impossible ports and contexts, runs longer than the model's context."""
import argparse
import io
import json
import sys
import time

import pytest

from diskformer.cli import main as cli
from diskformer.commands.ids_args import parse_ids


@pytest.mark.parametrize("text", ["[1.5]", "[true]", "[1, false]", '["1"]', "[[1]]", "{}", "1.5", "1e3", "0x10",
                                  "\u0661\u0662", "1_0", "[", "2" * 5000, "[" + "2" * 5000 + "]"])
def test_ids_that_are_not_token_ids_are_refused(text):
    with pytest.raises(argparse.ArgumentTypeError):
        parse_ids(text)


@pytest.mark.parametrize("text", [str(2 ** 31), str(2 ** 70), f"[{2 ** 70}]", "-1", "[-3]"])
def test_ids_out_of_range_are_refused(text):
    with pytest.raises(argparse.ArgumentTypeError, match="token ids must be"):
        parse_ids(text)


def test_good_ids_still_parse():
    assert parse_ids("[1, 2,3]") == [1, 2, 3]
    assert parse_ids(" 9707,1879 0 ") == [9707, 1879, 0]
    assert parse_ids(str(2 ** 31 - 1)) == [2 ** 31 - 1]


def one_line(err: str, prog: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(prog) and "Traceback" not in err, err
    return lines[0]


@pytest.mark.parametrize("ids", ["[1.5]", "[true]", str(2 ** 70)])
def test_reference_refuses_bad_ids_without_a_traceback(fixture_models, capsys, ids):
    with pytest.raises(SystemExit) as stop:
        cli(["reference", str(fixture_models / "micro-qwen3moe.gguf"), "--ids", ids])
    assert stop.value.code == 2
    assert "--ids" in capsys.readouterr().err


def test_tokenize_refuses_stdin_that_is_not_utf8(fixture_models, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"ok \xff\xfe")))
    assert cli(["tokenize", str(fixture_models / "micro-qwen3moe.gguf"), "-"]) == 1
    assert "not UTF-8" in one_line(capsys.readouterr().err, "diskformer tokenize:")
    assert cli(["tokenize", str(fixture_models / "micro-qwen3moe.gguf"), "a\udcffb"]) == 1
    assert "not valid UTF-8" in one_line(capsys.readouterr().err, "diskformer tokenize:")


@pytest.mark.parametrize("port", ["99999", "-1", "65536"])
def test_serve_refuses_a_port_that_is_not_one(capsys, port):
    assert cli(["serve", "--port", port]) == 2
    assert "not a TCP port" in one_line(capsys.readouterr().err, "diskformer serve:")


def test_reference_refuses_more_steps_than_the_context_at_once(fixture_models, capsys):
    model = str(fixture_models / "micro-qwen3moe.gguf")
    from py_engine.gguf import read_gguf_file
    ctx = read_gguf_file(model).metadata["qwen3moe.context_length"]
    for n in (ctx + 6, 10 ** 9):
        t0 = time.monotonic()
        assert cli(["reference", model, "--ids", "1", "--n", str(n)]) == 1
        assert time.monotonic() - t0 < 30
        line = one_line(capsys.readouterr().err, "diskformer reference:")
        assert f"holds {ctx}" in line and f"--n {ctx}" in line
    assert cli(["reference", model, "--ids", "1,2", "--teacher-force", ",".join(["3"] * ctx)]) == 1
    assert "teacher-force" in one_line(capsys.readouterr().err, "diskformer reference:")
    assert cli(["reference", model, "--ids", "1", "--n", "2"]) == 0
    assert len(json.loads(capsys.readouterr().out)["steps"]) == 2


def test_run_refuses_impossible_contexts_before_starting_the_engine(fixture_models, tmp_path, capsys):
    model = str(fixture_models / "micro-qwen3moe.gguf")
    assert cli(["run", model, "--ids", "1", "--n-ctx", "-5"]) == 2
    assert "--n-ctx must be >= 1" in one_line(capsys.readouterr().err, "diskformer run:")
    t0 = time.monotonic()
    assert cli(["run", model, "--ids", "1,2,3", "--n", "100000"]) == 1
    assert time.monotonic() - t0 < 10  # refused, not computed up to the limit
    assert "context holds 1024; give at most --n 1022" in one_line(capsys.readouterr().err, "diskformer run:")
    assert cli(["run", model, "--ids", "1,2,3", "--n", "20", "--n-ctx", "8"]) == 1
    assert "--n-ctx holds 8" in one_line(capsys.readouterr().err, "diskformer run:")
    (tmp_path / "list").mkdir()
    (tmp_path / "list" / "manifest.json").write_text("[1, 2]")
    assert cli(["run", "--store", str(tmp_path / "list"), "--ids", "1"]) == 1
    assert "manifest" in one_line(capsys.readouterr().err, "diskformer run:")


def test_reference_refuses_impossible_hyper_parameters_and_non_finite_logits(fixture_models, tmp_path, capsys):
    from cli_corpus import value_offsets, tensor_offsets
    import numpy as np

    src = fixture_models / "micro-qwen3moe.gguf"
    data = src.read_bytes()
    offsets = value_offsets(src)
    for key, value, said in (("expert_used_count", 99, "expert_used_count"),
                             ("embedding_length", 0, "embedding_length"),
                             ("attention.layer_norm_rms_epsilon", float("nan"), "rms_epsilon")):
        off, dtype = offsets[f"qwen3moe.{key}"]
        buf = bytearray(data)
        buf[off:off + dtype.itemsize] = np.array([value], dtype=dtype).tobytes()
        bad = tmp_path / f"{key}.gguf"
        bad.write_bytes(bytes(buf))
        assert cli(["reference", str(bad), "--ids", "1"]) == 1
        assert said in one_line(capsys.readouterr().err, "diskformer reference:")
    off, kind = tensor_offsets(src)["output_norm.weight"]
    assert kind == "F32"
    buf = bytearray(data)
    buf[off:off + 4] = b"\x00\x00\xc0\x7f"  # NaN
    (tmp_path / "nan.gguf").write_bytes(bytes(buf))
    assert cli(["reference", str(tmp_path / "nan.gguf"), "--ids", "1"]) == 1
    captured = capsys.readouterr()
    assert "not finite" in one_line(captured.err, "diskformer reference:") and "NaN" not in captured.out


def test_detokenize_refuses_deeply_nested_json(fixture_models, capsys):
    assert cli(["detokenize", str(fixture_models / "micro-qwen3moe.gguf"), "[" * 100000]) == 2
    assert "nests too deeply" in one_line(capsys.readouterr().err, "diskformer detokenize:")

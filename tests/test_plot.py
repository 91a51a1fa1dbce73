"""`python -m jaxsvr.plot`: curves read back from metrics.jsonl, figures written whole, bad
input in one line; bad lines and values of metrics.jsonl skipped with one warning each."""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest

from jaxsvr import plot
from jaxsvr.errors import InputError


def _run(folder, model="jpose", loss="triplet", scale=1.0):
    folder.mkdir()
    lines = [{"step": s, "train/loss": 10.0 / s} for s in (5, 10, 15, 20)]
    lines += [
        {"step": s, "test/ndcg_avg": 0.3 * scale + s / 100, "test/map_avg": 0.2} for s in (10, 20)
    ]
    (folder / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    config = {"model": {"name": model}, "loss": {"name": loss, "margin": "relevance"}}
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def test_curves_are_read_back_with_a_label(tmp_path):
    curves = plot.read_curves(_run(tmp_path / "a"))
    assert curves.label == "jpose triplet/relevance (a)"
    np.testing.assert_array_equal(curves.train_steps, [5, 10, 15, 20])
    np.testing.assert_allclose(curves.train_loss, [2.0, 1.0, 10 / 15, 0.5])
    np.testing.assert_array_equal(curves.test_steps, [10, 20])
    np.testing.assert_allclose(curves.test["ndcg_avg"], [0.4, 0.5])


@pytest.mark.parametrize("kind, magic", [("png", b"\x89PNG"), ("pdf", b"%PDF"), ("svg", b"<?xml")])
def test_figures_of_several_runs_are_written(tmp_path, kind, magic, capsys):
    a, b = _run(tmp_path / "a"), _run(tmp_path / "b", "mme", "sms", scale=2)
    out = tmp_path / f"curves.{kind}"
    assert plot.main([str(a), str(b), "--out", str(out)]) == 0
    assert out.read_bytes().startswith(magic)
    assert "wrote" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b", f"curves.{kind}"]


@pytest.mark.parametrize(
    "args, says",
    [
        (["{d}/none", "--out", "{d}/c.png"], "has no metrics.jsonl"),
        (["{d}/a", "--out", "{d}/c.txt"], "name a .png, .pdf or .svg"),
        (["{d}/a", "--out", "{d}/no/c.png"], "--out {d}/no/c.png: folder {d}/no does not exist"),
        (["{d}/a", "--out", "{d}/file/c.png"], "--out {d}/file/c.png: folder {d}/file is a file"),
        (["{d}/a", "--out", "{d}/dir.png"], "--out {d}/dir.png is a folder: name a .png"),
        (["{d}/a", "--out", "{d}/c.png", "--metric", "nope"], "no run has test metric 'nope'"),
        (["{d}/empty", "--out", "{d}/c.png"], "metrics.jsonl has no usable line (of 0)"),
    ],
)
def test_bad_input_is_one_line(tmp_path, args, says, capsys):
    _run(tmp_path / "a")
    (tmp_path / "file").write_text("")
    (tmp_path / "dir.png").mkdir()
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "metrics.jsonl").write_text("")
    code = plot.cli.run(plot.main, [x.format(d=tmp_path) for x in args])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and says.format(d=tmp_path) in err[0], err
    assert not (tmp_path / "c.png").exists() and not any((tmp_path / "dir.png").iterdir())


def test_a_failed_write_names_the_out_the_user_gave(tmp_path, monkeypatch, capsys):
    """Not the temporary file beside it (a folder or a permission can appear meanwhile)."""

    def fail(path, write):
        raise IsADirectoryError(21, "Is a directory", str(tmp_path / ".c.png.x.tmp"))

    monkeypatch.setattr(plot, "atomic_write", fail)
    code = plot.cli.run(plot.main, [str(_run(tmp_path / "a")), "--out", str(tmp_path / "c.png")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err == [f"error: cannot write --out {tmp_path / 'c.png'}: Is a directory"]


GOOD_LAST = b'{"step": 30, "train/loss": 0.25}'
BAD_LINES = [
    ("not UTF-8", b'{"step": 25, "train/loss": 1.0, "note": "\xff"}', "not UTF-8 text (byte 41)"),
    ("torn", b'{"step": 25, "train/lo', "the line: not JSON (a torn or damaged line)"),
    ("blank", b"", "the line: not JSON"),
    ("deep", b"[" * 100_000, "the line: not JSON"),
    ("a list", b"[25, 1.0]", "the line: not a JSON object"),
    ("a number", b"25", "the line: not a JSON object"),
    ("no step", b'{"train/loss": 1.0}', "its step None is not an integer >= 0"),
    ("text step", b'{"step": "25", "train/loss": 1.0}', "its step '25' is not"),
    ("float step", b'{"step": 25.0, "train/loss": 1.0}', "its step 25.0 is not"),
    ("negative step", b'{"step": -1, "train/loss": 1.0}', "its step -1 is not"),
    ("huge step", b'{"step": 1' + b"0" * 30 + b', "train/loss": 1.0}', "is not an integer"),
    ("1e400", b'{"step": 25, "train/loss": 1e400}', "train/loss = inf: not a finite number"),
    ("NaN", b'{"step": 25, "train/loss": NaN}', "train/loss = nan: not a finite number"),
    ("-Infinity", b'{"step": 25, "test/map_avg": -Infinity}', "test/map_avg = -inf: not"),
    ("huge int", b'{"step": 25, "train/loss": 1' + b"0" * 400 + b"}", "train/loss = 1000"),
    ("text", b'{"step": 25, "test/ndcg_avg": "0.5"}', "test/ndcg_avg = '0.5': not a finite"),
    ("object", b'{"step": 25, "test/ndcg_avg": {"v": 1}}', "test/ndcg_avg = {'v': 1}: not"),
    ("list", b'{"step": 25, "test/ndcg_avg": [0.5]}', "test/ndcg_avg = [0.5]: not"),
    ("bool", b'{"step": 25, "train/loss": true}', "train/loss = True: not a finite number"),
]


@pytest.mark.parametrize("line, says", [c[1:] for c in BAD_LINES], ids=[c[0] for c in BAD_LINES])
@pytest.mark.parametrize("last", [False, True], ids=["then a good line", "last"])
def test_a_bad_line_is_skipped_with_one_warning_naming_file_and_line(
    tmp_path, caplog, line, says, last
):
    run = _run(tmp_path / "a")
    with (run / "metrics.jsonl").open("ab") as f:
        f.write(line + b"\n" + (b"" if last else GOOD_LAST + b"\n"))
    with caplog.at_level(logging.WARNING):
        curves = plot.read_curves(run)
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1 and warnings[0].startswith(f"{run / 'metrics.jsonl'}:7: skipped ")
    assert says in warnings[0], warnings[0]
    np.testing.assert_array_equal(curves.train_steps, [5, 10, 15, 20] + ([] if last else [30]))
    np.testing.assert_array_equal(curves.test_steps, [10, 20])
    assert np.isfinite(curves.train_loss).all()


def test_only_the_bad_values_of_a_line_are_skipped(tmp_path, caplog):
    run = _run(tmp_path / "a")
    with (run / "metrics.jsonl").open("a") as f:
        f.write('{"step": 30, "train/loss": 1e400, "test/ndcg_avg": 0.7, "test/map_avg": "x"}\n')
    with caplog.at_level(logging.WARNING):
        curves = plot.read_curves(run)
    assert [r.getMessage().split(": skipped ")[1] for r in caplog.records] == [
        "train/loss = inf, test/map_avg = 'x': not a finite number"
    ]
    np.testing.assert_array_equal(curves.train_steps, [5, 10, 15, 20])
    np.testing.assert_array_equal(curves.test_steps, [10, 20, 30])
    np.testing.assert_allclose(curves.test["ndcg_avg"], [0.4, 0.5, 0.7])
    np.testing.assert_array_equal(np.isnan(curves.test["map_avg"]), [False, False, True])


def test_null_is_no_value_without_a_warning(tmp_path, caplog):
    """jaxsvr writes an undefined or non-finite metric as null (`jaxsvr.files.json_text`)."""
    run = _run(tmp_path / "a")
    with (run / "metrics.jsonl").open("a") as f:
        f.write('{"step": 30, "train/loss": null, "test/ndcg_avg": null, "test/map_avg": 0.3}\n')
    with caplog.at_level(logging.WARNING):
        curves = plot.read_curves(run)
    assert not caplog.records
    np.testing.assert_array_equal(curves.train_steps, [5, 10, 15, 20])
    np.testing.assert_array_equal(curves.test_steps, [10, 20, 30])
    np.testing.assert_array_equal(np.isnan(curves.test["ndcg_avg"]), [False, False, True])


def test_a_run_without_one_usable_line_is_one_error(tmp_path, caplog):
    run = tmp_path / "a"
    run.mkdir()
    (run / "metrics.jsonl").write_bytes(b'{"step": "x"}\n\xff\n{"step": 3, "train/loss": NaN}\n')
    with caplog.at_level(logging.WARNING), pytest.raises(InputError) as e:
        plot.read_curves(run)
    assert str(e.value).startswith(f"{run / 'metrics.jsonl'} has no usable line (of 3)")
    assert len(caplog.records) == 3

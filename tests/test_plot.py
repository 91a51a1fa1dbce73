"""`python -m jaxsvr.plot`: curves read back from metrics.jsonl, figures written whole, bad
input in one line."""

from __future__ import annotations

import json

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
        (["{d}/a", "--out", "{d}/no/c.png"], "does not exist"),
        (["{d}/a", "--out", "{d}/c.png", "--metric", "nope"], "no run has test metric 'nope'"),
    ],
)
def test_bad_input_is_one_line(tmp_path, args, says, capsys):
    _run(tmp_path / "a")
    code = plot.cli.run(plot.main, [x.format(d=tmp_path) for x in args])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and says in err[0], err
    assert not (tmp_path / "c.png").exists()


def test_a_damaged_line_names_its_file_and_line(tmp_path):
    run = _run(tmp_path / "a")
    with (run / "metrics.jsonl").open("a") as f:
        f.write("{torn\n")
    with pytest.raises(InputError, match=r"metrics.jsonl:7: not a JSON object"):
        plot.read_curves(run)

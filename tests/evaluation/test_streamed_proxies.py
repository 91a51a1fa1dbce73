"""Streamed evaluation under caption proxies (BoW, PoS, SYN with S = 1 on own pairs)
equals the dense path exactly, by the library and by the command line."""

import csv
import dataclasses
import json
import re

import numpy as np
import pytest

from jaxsvr import evaluate as evaluate_cli
from jaxsvr.annotations import caption_table
from jaxsvr.evaluation import metrics, numpy_engine, streamed, streamed_proxies
from jaxsvr.relevance import __main__ as relevance_cli
from jaxsvr.relevance import proxies, proxy_tables
from jaxsvr.runtime import cli


def _write_rows(path, header, rows):
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)
    return str(path)


@pytest.fixture(scope="module")
def epic_subset(epic_dir, tmp_path_factory):
    """240 EK-100 test clips (every 20th of the first 4800: a few per video) and the
    sentences of their narrations plus every 50th other, as CSVs; their tables parsed
    once (with the EPIC classes for SYN), and per video."""
    folder = tmp_path_factory.mktemp("proxy_tables")
    with open(epic_dir / "EPIC_100_retrieval_test.csv", newline="") as f:
        clip_header, *clip_rows = csv.reader(f)
    with open(epic_dir / "EPIC_100_retrieval_test_sentence.csv", newline="") as f:
        sent_header, *sent_rows = csv.reader(f)
    clip_rows = clip_rows[:4800:20]
    narrations = {r[clip_header.index("narration")] for r in clip_rows}
    sent_rows = [r for i, r in enumerate(sent_rows) if r[1] in narrations or i % 50 == 0]
    files = {
        "clips": _write_rows(folder / "clips.csv", clip_header, clip_rows),
        "sentences": _write_rows(folder / "sentences.csv", sent_header, sent_rows),
        "verbs": str(epic_dir / "EPIC_100_verb_classes.csv"),
        "nouns": str(epic_dir / "EPIC_100_noun_classes.csv"),
        "folder": folder,
    }
    tables = proxy_tables.read(
        "syn",
        files["clips"],
        files["sentences"],
        verb_classes=files["verbs"],
        noun_classes=files["nouns"],
    )
    groups = caption_table.read_csv(files["clips"]).video_groups()[1]
    return files, tables, dataclasses.replace(tables, groups=groups)


def _shape(tables):
    """(rows, columns) of the tables' relevance: videos with per-video groups."""
    rows = max(tables.groups) + 1 if tables.groups else len(tables.row_texts)
    return rows, len(tables.col_texts)


def _embeddings(n_videos, n_texts, seed=0):
    """Integer-valued 8-d embeddings: exact dot products (the dense similarity whatever the
    product's order) with many ties in every query."""
    rng = np.random.default_rng(seed)
    return [
        np.round(1.5 * rng.standard_normal((n, 8))).astype(np.float32) for n in (n_videos, n_texts)
    ]


def _dense(name, tables, own, **kw):
    """The dense relevance, as `python -m jaxsvr.relevance proxy --columns ... [--own]`."""
    t = tables
    rel = proxies.compute(name, t.rows, t.cols, classes=t.classes, row_groups=t.groups, **kw)
    return proxies.own_by_text(rel, t.row_texts, t.col_texts, t.groups) if own else rel


@pytest.mark.parametrize(
    "name, per_video, own, kw",
    [
        ("bow", False, True, {}),
        ("pos", True, True, {"weights": (0.3, 0.7), "rho": 0.5}),
        ("syn", False, True, {}),
        ("syn", True, False, {}),
    ],
)
def test_set_proxies_equal_the_dense_path(epic_subset, monkeypatch, name, per_video, own, kw):
    _, tables, video_tables = epic_subset
    tables = video_tables if per_video else tables
    dense = _dense(name, tables, own, **kw)
    rel = streamed_proxies.proxy_relevance(name, tables, own=own, **kw)
    assert rel.shape == dense.shape == _shape(tables)
    # Blocks of any bounds, in both directions, are the dense matrix's bit for bit.
    for direction, matrix in enumerate((dense, dense.T)):
        bounds = [*range(0, len(matrix), 37), len(matrix)]
        got = np.concatenate([rel.block(direction, a, b) for a, b in zip(bounds, bounds[1:])])
        np.testing.assert_array_equal(got, matrix)
    raw = proxies.compute(name, tables.rows, tables.cols, classes=tables.classes, **kw)
    if own and not per_video:  # S = 1 on the pairs of equal texts
        mask = np.equal.outer(np.array(tables.row_texts), np.array(tables.col_texts))
        assert mask.sum() >= len(tables.row_texts) and np.all(dense[mask] == 1.0)
        # above the proxy on narrations without a verb (PoS, SYN); BoW is 1 there anyway
        assert np.any(raw[mask] < 1.0) == (name != "bow")
    video, text = _embeddings(*dense.shape)
    # Blocks of 17 queries in both paths (the engine's would hold every query here): own
    # pairs in many blocks of either direction, the last one partial.
    monkeypatch.setattr(numpy_engine, "block_rows", lambda n_items: 17)
    want = metrics.evaluate(video @ text.T, dense, bounds=True, backend="numpy")
    got = streamed.evaluate_embeddings(video, text, rel, bounds=True, workers=2)
    assert got.keys() == want.keys()
    assert {k: got[k] for k in want if got[k] != want[k]} == {}  # every key, exactly
    assert want["tied_v2t"] > 0 and want["tied_t2v"] > 0


def test_square_tables_take_own_captions_by_position(epic_subset):
    # Without column captions, caption j is its own row's (its video's), as
    # `python -m jaxsvr.relevance proxy` without --columns scores it.
    _, tables, video_tables = epic_subset
    for t in (tables, video_tables):
        square = dataclasses.replace(t, cols=None, col_texts=None)
        own = np.arange(len(t.rows)) if t.groups is None else np.asarray(t.groups)
        dense = proxies.relevance(proxies.pos(t.rows, row_groups=t.groups), own)
        rel = streamed_proxies.proxy_relevance("pos", square)
        np.testing.assert_array_equal(rel.block(0, 0, dense.shape[0]), dense)
        np.testing.assert_array_equal(rel.block(1, 5, 60), dense[:, 5:60].T)


def _run(argv, capsys):
    code = cli.run(evaluate_cli.main, [str(x) for x in argv])
    out = capsys.readouterr()
    assert code == 0, out.err
    return json.loads(out.out)


@pytest.mark.parametrize(
    "flags",
    [
        ["--proxy", "syn", "--per-video", "--rho", "0.5", "--weights", "0.25", "0.75"],
        ["--proxy", "bow", "--no-own"],
    ],
)
def test_cli_equals_the_dense_cli(epic_subset, tmp_path, capsys, flags):
    files, tables, video_tables = epic_subset
    classes = ["--verb-classes", files["verbs"], "--noun-classes", files["nouns"]]
    if "syn" in flags:
        flags = [*flags, *classes]
    own = [] if "--no-own" in flags else ["--own"]
    tables = video_tables if "--per-video" in flags else tables
    video, text = _embeddings(*_shape(tables), seed=1)
    for name, array in (("video", video), ("text", text), ("sim", video @ text.T)):
        np.save(tmp_path / f"{name}.npy", array)
    tables_argv = ["--captions", files["clips"], "--columns", files["sentences"]]
    dense_flags = [f for f in flags if f != "--no-own"]
    argv = ["proxy", *tables_argv, *dense_flags, *own, "--out", tmp_path / "rel.npy"]
    assert relevance_cli.main([str(x) for x in argv]) == 0
    dense = _run(
        ["--similarity", tmp_path / "sim.npy", "--relevance", tmp_path / "rel.npy", "--bounds"],
        capsys,
    )
    embeddings = ["--embeddings", tmp_path / "video.npy", tmp_path / "text.npy"]
    tables_argv = ["--clips", files["clips"], "--sentences", files["sentences"]]
    assert _run([*embeddings, *tables_argv, *flags, "--bounds"], capsys) == dense


def _no_caption_column(files):
    path = files["folder"] / "no_captions.csv"
    text = open(files["sentences"]).read().replace("narration_id,narration", "id,text", 1)
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    "change, match",
    [
        (lambda argv, f: [*argv, "--proxy", "met"], "METEOR.*dense path"),
        (
            lambda argv, f: [*argv[:-1], _no_caption_column(f), "--proxy", "bow"],
            "column 'caption' is missing",
        ),
        (lambda argv, f: [*argv, "--proxy", "bow", "--per-video"], r"has \d+ videos"),
        (lambda argv, f: [*argv, "--per-video"], "without --proxy: --per-video"),
    ],
)
def test_cli_bad_inputs_are_one_line(epic_subset, tmp_path, capsys, change, match):
    files, tables, _ = epic_subset
    video, text = _embeddings(*_shape(tables))
    np.save(tmp_path / "video.npy", video)
    np.save(tmp_path / "text.npy", text)
    argv = ["--embeddings", tmp_path / "video.npy", tmp_path / "text.npy"]
    argv += ["--clips", files["clips"], "--sentences", files["sentences"]]
    code = cli.run(evaluate_cli.main, [str(x) for x in change(argv, files)])
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1, err
    assert re.search(match, err), err

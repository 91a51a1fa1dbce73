"""`python -m jaxsvr.relevance proxy`: matrices for every proxy, per-video rows, errors."""

import logging
import subprocess
import sys

import numpy as np
import pytest

from jaxsvr.annotations import caption_table
from jaxsvr.nlp import captions
from jaxsvr.relevance import __main__ as relevance_cli
from jaxsvr.relevance import proxies
from jaxsvr.runtime import cli


@pytest.fixture()
def caption_files(tmp_path):
    a = tmp_path / "a.csv"
    a.write_text(
        "video_id,caption\n"
        "v0,stir the soup in the pot\nv0,mix the soup\nv1,cut the onion\n"
        "v1,chop an onion on the board\nv1,slice onions\n"
    )
    b = tmp_path / "b.csv"
    b.write_text('narration_id,narration\nx_0,stir soup\nx_1,"cut onion, board"\n')
    return a, b


def test_every_proxy_writes_float32(caption_files, tmp_path, wordnet_reader, epic_dir):
    a, b = caption_files
    classes = ["--verb-classes", epic_dir / "EPIC_100_verb_classes.csv"]
    classes += ["--noun-classes", epic_dir / "EPIC_100_noun_classes.csv"]
    parsed_a, parsed_b = (captions.parse(caption_table.read_csv(f).texts) for f in (a, b))
    for name, extra in [("bow", []), ("pos", []), ("syn", classes), ("syn", []), ("met", [])]:
        out = tmp_path / f"{name}.npy"
        argv = ["proxy", "--proxy", name, "--captions", a, "--columns", b, "--out", out]
        assert relevance_cli.main([str(x) for x in [*argv, *extra, "--workers", "1"]]) == 0
        rel = np.load(out)
        assert rel.shape == (5, 2) and rel.dtype == np.float32
        if name == "bow":
            np.testing.assert_array_equal(rel, proxies.bow(parsed_a, parsed_b))
        if name == "met":
            want = proxies.met(parsed_a, parsed_b, wordnet=wordnet_reader, workers=1)
            np.testing.assert_array_equal(rel, want)


def test_per_video_rows_and_square_default(caption_files, tmp_path):
    a, _ = caption_files
    out = tmp_path / "pos.npy"
    argv = ["proxy", "--proxy", "pos", "--captions", str(a), "--out", str(out)]
    assert relevance_cli.main(argv) == 0
    rel = np.load(out)
    assert rel.shape == (5, 5) and np.all(np.diag(rel) == 1.0)  # S = 1 on own captions
    assert relevance_cli.main([*argv, "--per-video"]) == 0
    rel = np.load(out)
    assert rel.shape == (2, 5)
    np.testing.assert_array_equal(rel[[0, 0, 1, 1, 1], range(5)], 1.0)  # each video's own
    assert relevance_cli.main([*argv, "--per-video", "--no-own"]) == 0
    raw = np.load(out)
    # v1 (3 captions, rho 0.25: items of any caption) has verbs {cut, chop, slice} and
    # nouns {onion, board}; column 2 is "cut the onion"
    assert raw[1, 2] == pytest.approx(0.5 / 3 + 0.5 / 2)
    np.testing.assert_array_equal(raw[0, 2:], rel[0, 2:])  # not own: the proxy either way
    assert relevance_cli.main([*argv, "--per-video", "--no-own", "--rho", "0.5"]) == 0
    assert np.load(out)[1, 2] == pytest.approx(0.5 * 0 + 0.5 * 1)  # only "onion" is in 2 of 3


def test_errors_are_one_line(caption_files, tmp_path, capsys, caplog):
    """The first case as a user runs it (a subprocess); the others through the command's
    edge (`cli.run`, as its `__main__` runs it) in this process, its log (INFO and up, as on
    its stderr) captured."""
    a, b = caption_files
    bad = tmp_path / "bad.csv"
    bad.write_text("video_id,text\nv,hello\n")
    out = tmp_path / "r.npy"
    cases = [
        ["--proxy", "bow", "--captions", bad],
        ["--proxy", "bow", "--captions", tmp_path / "none.csv"],
        ["--proxy", "syn", "--captions", a, "--verb-classes", a],
        ["--proxy", "bow", "--captions", b, "--per-video"],
        ["--proxy", "bow", "--captions", a, "--pipeline", "en_core_web_xx_missing"],
        ["--proxy", "bow", "--captions", a, "--per-video", "--rho", "0"],
        ["--proxy", "bow", "--captions", a, "--own"],
        ["--proxy", "bow", "--captions", a, "--columns", b, "--own", "--no-own"],
    ]
    for i, args in enumerate(cases):
        argv = ["proxy", *map(str, args), "--out", str(out)]
        if i == 0:
            r = subprocess.run(
                [sys.executable, "-m", "jaxsvr.relevance", *argv],
                capture_output=True,
                text=True,
                timeout=300,
            )
            code, stderr = r.returncode, r.stderr
        else:
            with caplog.at_level(logging.INFO):
                try:
                    code = cli.run(relevance_cli.main, argv)
                except SystemExit as e:  # argparse's usage errors (cli.ArgumentParser)
                    code = e.code
            captured = capsys.readouterr()
            assert captured.out == "" and not caplog.records, (captured.out, caplog.records)
            stderr = captured.err
        assert code == 2 and stderr.startswith("error: "), stderr
        assert len(stderr.strip().splitlines()) == 1, stderr
    assert not list(tmp_path.glob("r.npy*"))


def test_columns_with_own_captions_by_text(caption_files, tmp_path):
    a, _ = caption_files
    cols = tmp_path / "cols.csv"
    cols.write_text("narration_id,narration\nx_0,mix the soup\nx_1,boil water\nx_2,slice onions\n")
    out = tmp_path / "bow.npy"
    argv = ["proxy", "--proxy", "bow", "--captions", a, "--columns", cols, "--out", out]
    assert relevance_cli.main([str(x) for x in argv]) == 0
    raw = np.load(out)
    assert relevance_cli.main([str(x) for x in [*argv, "--own"]]) == 0
    own = np.load(out)
    want = raw.copy()
    want[1, 0] = want[4, 2] = 1.0  # rows 1 and 4 are "mix the soup" and "slice onions"
    np.testing.assert_array_equal(own, want)
    assert relevance_cli.main([str(x) for x in [*argv, "--own", "--per-video"]]) == 0
    per_video = np.load(out)
    assert per_video.shape == (2, 3)
    assert per_video[0, 0] == per_video[1, 2] == 1.0 and per_video[0, 2] < 1.0
    assert per_video[1, 0] < 1.0 and np.all(per_video[:, 1] < 1.0)


def test_epic_proxy_with_own_equals_the_runs_test_relevance(epic_dir, tmp_path):
    """The EK-100 test clips x sentences under BoW with S = 1 on own narrations, by the
    command line and as a training run's test relevance (the re-scoring job's matrix)."""
    from jaxsvr.annotations import epic100, load
    from jaxsvr.relevance import split_relevance

    out = tmp_path / "bow.npy"
    clips, sents = epic_dir / epic100.TEST_CLIPS, epic_dir / epic100.TEST_SENTENCES
    argv = ["proxy", "--proxy", "bow", "--captions", clips, "--columns", sents, "--own"]
    assert relevance_cli.main([str(x) for x in [*argv, "--out", out]]) == 0
    got = np.load(out)
    ann = load.epic100_folder(str(epic_dir), "EPIC_100_uda_source_train.csv")
    spec = split_relevance.RelevanceSpec(proxy="bow", own_is_relevant=True)
    want = split_relevance.test_relevance(
        spec, ann.test, ann.sentences, ann.sentence_rows(), ann.clip_texts
    )
    assert got.shape == (9668, 3842)
    np.testing.assert_array_equal(got, want)
    # every sentence is the own narration of some clip (found by its text)
    assert np.all((got == 1).any(axis=0))

"""The EK-100 challenge file (issue 29, part 1): `jaxsvr.evaluation.submission` writes what
the public JPoSE script writes (byte for byte what pandas' own `to_pickle` writes, read back by
pandas), `python -m jaxsvr.submit` writes a run's or exported matrices' file, and
`python -m jaxsvr.evaluate --submission` scores one, matched to the tables by id: a run's
file scores the run's own test metrics, a shuffled one the same, a bad one is one line."""

from __future__ import annotations

import io
import json
import pickle

import numpy as np
import pandas as pd
import pytest
from kitchen_files import write_epic_folder
from train_runs import config

from jaxsvr import evaluate, submit
from jaxsvr.annotations import epic100
from jaxsvr.errors import InputError
from jaxsvr.evaluation import submission
from jaxsvr.runtime import cli
from jaxsvr.train import loop

IDS = ["P01_11_0", "P01_11_1", "P01_11_2"]
TEXT_IDS = ["P01_11_0", "P01_11_2"]
SIM = np.array([[0.9, 0.1], [0.2, 0.8], [0.3, 0.4]], np.float32)


def test_the_file_is_what_pandas_writes_and_reads(tmp_path):
    """The public JPoSE script's object (pandas Index of narration ids, protocol 4)."""
    ours = tmp_path / "ours.pkl"
    submission.write(ours, submission.Submission(SIM, IDS, TEXT_IDS))
    theirs = _entry()
    if pd.Index.__module__ == "pandas":  # pandas >= 3 names the class as jaxsvr writes it
        buffer = io.BytesIO()
        pd.to_pickle(theirs, buffer, protocol=4)
        assert ours.read_bytes() == buffer.getvalue()
    read = pd.read_pickle(ours)
    assert list(read) == list(theirs)
    for key, value in theirs.items():
        if isinstance(value, pd.Index):
            assert read[key].equals(value) and read[key].dtype == object
            assert read[key].name == "narration_id"
        elif isinstance(value, np.ndarray):
            assert read[key].dtype == np.float32 and np.array_equal(read[key], value)
        else:
            assert read[key] == value and type(read[key]) is type(value)
    # and jaxsvr reads pandas' files: the JPoSE script's object, and pandas' default Index
    # of strings (pandas 3: a StringArray), plain lists and arrays of ids too
    for ids in (
        lambda x: pd.Index(x, dtype=object, name="narration_id"),
        pd.Index,
        lambda x: pd.Index(x, dtype="string"),
        list,
        lambda x: np.array(x, dtype=object),
    ):
        pandas_file = tmp_path / "theirs.pkl"
        pd.to_pickle({**theirs, "vis_ids": ids(IDS), "txt_ids": ids(TEXT_IDS)}, pandas_file)
        back = submission.read(pandas_file, allow_pickle=True)
        assert back.vis_ids == IDS and back.txt_ids == TEXT_IDS and np.array_equal(back.sim, SIM)
        assert back.supervision == {"sls_pt": 2, "sls_tl": 3, "sls_td": 3}


def _pickled(obj) -> bytes:
    return pickle.dumps(obj, protocol=4)


def _entry(**changes) -> dict:
    """The public JPoSE script's dict (pandas Indexes of narration ids), with `changes`;
    a key changed to DROP is left out."""
    obj = {
        "version": 0.1,
        "challenge": "multi_instance_retrieval",
        "sim_mat": SIM,
        "vis_ids": pd.Index(IDS, dtype=object, name="narration_id"),
        "txt_ids": pd.Index(TEXT_IDS, dtype=object, name="narration_id"),
        "sls_pt": 2,
        "sls_tl": 3,
        "sls_td": 3,
    }
    obj.update(changes)
    return {k: v for k, v in obj.items() if v is not DROP}


DROP = object()


class _RunsCode:
    def __reduce__(self):
        import os

        return os.system, ("echo pwned",)


# file contents, what the one error line says
BAD_FILES = [
    ("not a pickle", b"sim,vis\n1,2\n", "is not a readable pickle"),
    ("truncated", _pickled(_entry())[:-40], "is not a readable pickle"),
    ("empty", b"", "is not a readable pickle"),
    ("runs code", _pickled({"x": _RunsCode()}), "refers to posix.system"),
    ("a list", _pickled([1, 2]), "holds a list, not the challenge's dict"),
    ("no sim_mat", _pickled(_entry(sim_mat=DROP)), "has no 'sim_mat'"),
    ("no sls_td", _pickled(_entry(sls_td=DROP)), "has no 'sls_td'"),
    ("another challenge", _pickled(_entry(challenge="action_recognition")), "'action_recognition'"),
    ("1-D sim_mat", _pickled(_entry(sim_mat=SIM[:, 0])), "sim_mat is 1-D [3], not 2-D"),
    ("string sim_mat", _pickled(_entry(sim_mat=np.array([["a"]]))), "not a numeric array"),
    ("NaN", _pickled(_entry(sim_mat=np.where(SIM > 0.85, np.nan, SIM))), "non-finite values"),
    ("inf", _pickled(_entry(sim_mat=np.where(SIM < 0.15, np.inf, SIM))), "non-finite values"),
    (
        "fewer ids than rows",
        _pickled(_entry(vis_ids=pd.Index(IDS[:2]))),
        "2 vis_ids for the 3 rows",
    ),
    ("more ids than columns", _pickled(_entry(txt_ids=pd.Index([*TEXT_IDS, "z"]))), "columns"),
    ("repeated id", _pickled(_entry(vis_ids=pd.Index(["a", "b", "a"]))), "repeats 'a'"),
    ("ids not strings", _pickled(_entry(vis_ids=pd.Index([1, 2, 3]))), "not a list of narration"),
    ("level out of range", _pickled(_entry(sls_pt=9)), "sls_pt is 9"),
    ("level not a number", _pickled(_entry(sls_tl="3")), "sls_tl is '3'"),
]


@pytest.mark.parametrize("case, data, says", BAD_FILES, ids=[c[0] for c in BAD_FILES])
def test_a_bad_file_is_one_error(tmp_path, capsys, case, data, says):
    path = tmp_path / "s.pkl"
    path.write_bytes(data)
    with pytest.raises(InputError) as e:
        submission.read(path, allow_pickle=True)
    assert says in str(e.value) and len(str(e.value).splitlines()) == 1, str(e.value)
    assert "pwned" not in capsys.readouterr().out


def test_without_consent_nothing_is_unpickled(tmp_path, capsys):
    path = tmp_path / "s.pkl"
    path.write_bytes(_pickled({"x": _RunsCode()}))
    with pytest.raises(InputError, match="pass --allow-pickle if you trust the file"):
        submission.read(path)
    assert "pwned" not in capsys.readouterr().out


# -- end to end on the built-in kitchen data written as EPIC-KITCHENS-100 tables -----------


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A runlocal JPoSE run on EPIC-format tables, its test similarity exported."""
    root = tmp_path_factory.mktemp("submission")
    folder = root / "epic"
    write_epic_folder(folder)
    workdir = root / "run"
    c = config("epic_jpose", "runlocal", data__annotations=str(folder))
    c.eval.export_similarity = True
    loop.train_and_evaluate(c, workdir)
    return folder, workdir


def _cli(module, args, capsys) -> tuple[int, str, str]:
    try:
        code = cli.run(module.main, [str(a) for a in args])
    except SystemExit as e:  # argparse's usage errors
        code = e.code
    out = capsys.readouterr()
    return code, out.out, out.err


def _tables(folder) -> list:
    return [
        "--clips",
        folder / epic100.TEST_CLIPS,
        "--sentences",
        folder / epic100.TEST_SENTENCES,
    ]


def test_a_run_submitted_and_scored_gives_its_own_metrics(run, tmp_path, capsys):
    folder, workdir = run
    out = tmp_path / "sub.pkl"
    code, _, err = _cli(submit, ["--workdir", workdir, "--out", out], capsys)
    assert code == 0 and err.startswith(f"wrote {out}: 60 clips x 58 sentences"), err
    code, text, err = _cli(
        evaluate, ["--submission", out, "--allow-pickle", *_tables(folder)], capsys
    )
    assert code == 0 and err == "", err
    scored = json.loads(text)
    own = json.loads((workdir / "metrics.json").read_text())
    shared = [k for k in scored if k in own]
    assert len(shared) >= 30 and {k: scored[k] for k in shared} == {k: own[k] for k in shared}

    # the same file shuffled (rows and columns, ids with them) scores the same
    entry = submission.read(out, allow_pickle=True)
    rng = np.random.default_rng(0)
    rows, cols = rng.permutation(len(entry.vis_ids)), rng.permutation(len(entry.txt_ids))
    shuffled = submission.Submission(
        entry.sim[np.ix_(rows, cols)],
        [entry.vis_ids[i] for i in rows],
        [entry.txt_ids[j] for j in cols],
    )
    submission.write(tmp_path / "shuffled.pkl", shuffled)
    code, again, _ = _cli(
        evaluate,
        ["--submission", tmp_path / "shuffled.pkl", "--allow-pickle", *_tables(folder)],
        capsys,
    )
    assert code == 0 and json.loads(again) == scored

    # exported matrices: the run's own test_similarity.npy, alone and as an ensemble of two
    code, _, err = _cli(
        submit,
        [
            "--similarity",
            workdir / "test_similarity.npy",
            *_tables(folder),
            "--out",
            tmp_path / "e.pkl",
        ],
        capsys,
    )
    assert code == 0, err
    exported = submission.read(tmp_path / "e.pkl", allow_pickle=True)
    assert exported.vis_ids == entry.vis_ids and exported.txt_ids == entry.txt_ids
    np.testing.assert_allclose(exported.sim, entry.sim, rtol=1e-6, atol=1e-6)
    twice = [workdir / "test_similarity.npy"] * 2
    code, _, _ = _cli(
        submit,
        ["--similarity", *twice, *_tables(folder), "--out", tmp_path / "e2.pkl", "--sls-pt", "1"],
        capsys,
    )
    ensemble = submission.read(tmp_path / "e2.pkl", allow_pickle=True)
    assert code == 0 and np.array_equal(ensemble.sim, exported.sim)
    assert ensemble.supervision == {"sls_pt": 1, "sls_tl": 3, "sls_td": 3}


def _shifted_ids(entry, k=1):
    return submission.Submission(entry.sim, [*entry.vis_ids[:-k], "P99_99_9"], entry.txt_ids)


# what the file or the flags do wrong, the one error line
CLI_CASES = [
    ("no consent", lambda e: e, ["--submission", "{sub}", "{tables}"], "pass --allow-pickle"),
    (
        "no tables",
        lambda e: e,
        ["--submission", "{sub}", "--allow-pickle"],
        "--submission needs --clips and --sentences",
    ),
    (
        "a clip of the table missing",
        lambda e: submission.Submission(e.sim[1:], e.vis_ids[1:], e.txt_ids),
        ["--submission", "{sub}", "--allow-pickle", "{tables}"],
        "vis_ids lacks 1 of the 60 test clips of the table (first 'TE00_0')",
    ),
    (
        "a foreign clip",
        _shifted_ids,
        ["--submission", "{sub}", "--allow-pickle", "{tables}"],
        "vis_ids lacks 1 of the 60 test clips",
    ),
    (
        "an extra sentence",
        lambda e: submission.Submission(
            np.concatenate([e.sim, e.sim[:, :1]], 1), e.vis_ids, [*e.txt_ids, "P99_99_9"]
        ),
        ["--submission", "{sub}", "--allow-pickle", "{tables}"],
        "txt_ids holds 1 sentences that are not in the test table (first 'P99_99_9')",
    ),
    (
        "a relevance of other tables",
        lambda e: e,
        ["--submission", "{sub}", "--allow-pickle", "{tables}", "--relevance", "{rel}"],
        "relevance {rel} is 2 x 2, the tables are 60 clips x 58 sentences",
    ),
    (
        "similarity and submission",
        lambda e: e,
        ["--submission", "{sub}", "--similarity", "{rel}", "--allow-pickle"],
        "not allowed with argument",
    ),
]


@pytest.mark.parametrize("case, change, args, says", CLI_CASES, ids=[c[0] for c in CLI_CASES])
def test_evaluate_submission_bad_input(run, tmp_path, capsys, case, change, args, says):
    folder, workdir = run
    out = tmp_path / "sub.pkl"
    sim = np.load(workdir / "test_similarity.npy")
    clips = epic100.read_clips(folder / epic100.TEST_CLIPS)
    sents = epic100.read_sentences(folder / epic100.TEST_SENTENCES, clips)
    entry = submission.Submission(sim, list(clips.narration_id), list(sents.narration_id))
    submission.write(out, change(entry))
    np.save(tmp_path / "rel.npy", np.eye(2, dtype=np.float32))
    argv = []
    for a in args:
        argv += _tables(folder) if a == "{tables}" else [a]
    argv = [str(a).format(sub=out, rel=tmp_path / "rel.npy") for a in argv]
    code, text, err = _cli(evaluate, argv, capsys)
    lines = err.strip().splitlines()
    assert code == 2 and text == "" and len(lines) == 1, lines
    assert says.format(rel=tmp_path / "rel.npy") in lines[0], lines[0]


SUBMIT_CASES = [
    (["--workdir", "{run}", "--clips", "c.csv"], "--clips and --sentences go with --similarity"),
    (["--similarity", "{sim}"], "--similarity needs --clips and --sentences"),
    (["--similarity", "{rel}", "{tables}"], "similarity {rel} is 2 x 2, the tables are 60 clips"),
    (["--workdir", "{run}", "--sls-pt", "6"], "argument --sls-pt: give a whole number in [0, 5]"),
    (["--workdir", "{run}", "--sls-td=nan"], "argument --sls-td: give a whole number"),
    (["--workdir", "{run}", "--checkpoint", "99"], "has no checkpoint of step 99"),
]


@pytest.mark.parametrize("args, says", SUBMIT_CASES, ids=[c[1][:40] for c in SUBMIT_CASES])
def test_submit_bad_input_writes_nothing(run, tmp_path, capsys, args, says):
    folder, workdir = run
    np.save(tmp_path / "rel.npy", np.eye(2, dtype=np.float32))
    names = {"run": workdir, "sim": workdir / "test_similarity.npy", "rel": tmp_path / "rel.npy"}
    argv = []
    for a in args:
        argv += _tables(folder) if a == "{tables}" else [a]
    argv = [str(a).format(**names) for a in argv] + ["--out", str(tmp_path / "out.pkl")]
    code, _, err = _cli(submit, argv, capsys)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and says.format(**names) in lines[0], lines
    assert not (tmp_path / "out.pkl").exists()

"""Files a run wrote, read back by `jaxsvr.retrieve`, the rescore job and the warm start, are
checked, never trusted: a damaged retrieval cache is rebuilt with one warning and gives the
clean run's answers; damaged or foreign run files (config.json, vocab.json, checkpoints)
are one error line naming the file and the flag or config key the user set."""

from __future__ import annotations

import dataclasses
import json
import logging
import shutil

import numpy as np
import pytest
from train_runs import config, run_retrieve

from jaxsvr import retrieve
from jaxsvr.checkpoints.layout import find_checkpoint, restore_params
from jaxsvr.errors import InputError
from jaxsvr.runs import rescore
from jaxsvr.runs.gallery import Gallery, TrainedRun
from jaxsvr.train import loop

QUERY = "take the plate"


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    """A finished runlocal MME run, its run object and its gallery (cached in the run)."""
    work = tmp_path_factory.mktemp("mme")
    loop.train_and_evaluate(config("epic_mme"), work)
    run = TrainedRun.load(work)
    return work, run, Gallery.of(run)


def _copy(clean, tmp_path):
    return shutil.copytree(clean[0], tmp_path / "run")


# -- the retrieval cache: retrieval/best.npz and its manifest retrieval/best.json --------


def _npz(edit):
    def damage(cache):
        arrays = dict(np.load(cache / "best.npz"))
        edit(arrays)
        with (cache / "best.npz").open("wb") as f:
            np.savez(f, **arrays)

    return damage


def _manifest(edit):
    def damage(cache):
        manifest = json.loads((cache / "best.json").read_text())
        edit(manifest)
        (cache / "best.json").write_text(json.dumps(manifest))

    return damage


def _agreed(npz_edit):
    """`npz_edit`, with the manifest edited to agree with the new arrays."""

    def damage(cache):
        _npz(npz_edit)(cache)
        arrays = np.load(cache / "best.npz")
        _manifest(
            lambda m: [m["arrays"][k].update(shape=list(a.shape)) for k, a in arrays.items()]
        )(cache)

    return damage


def _write(name, data: bytes):
    return lambda cache: (cache / name).write_bytes(data)


def _truncate(cache):
    data = (cache / "best.npz").read_bytes()
    (cache / "best.npz").write_bytes(data[: len(data) // 2])


def _set(array_name, rows, value):
    def edit(arrays):
        arrays[array_name][rows] = value

    return edit


def _meta(edit):
    return _manifest(lambda m: edit(m["meta"]))


def _shorten(table, columns=None):
    def edit(meta):
        for column in columns or meta[table]:
            meta[table][column] = meta[table][column][:-1]

    return edit


CACHE_CASES = [
    ("fewer rows", _npz(lambda a: a.update({"video/": a["video/"][:-1]})), "the manifest says"),
    (
        "fewer rows, manifest too",
        _agreed(lambda a: a.update({"video/": a["video/"][:-1]})),
        "array video/ has 59 rows for 60 clips",
    ),
    ("NaN rows", _npz(_set("video/", slice(3, 5), np.nan)), "holds NaN or inf"),
    ("inf", _npz(_set("text/", (0, 0), np.inf)), "holds NaN or inf"),
    ("clip lists shortened", _meta(_shorten("clips")), "a sentence names a clip that is not"),
    (
        "sentence lists shortened",
        _meta(_shorten("sentences")),
        "array text/ has 58 rows for 57 sentences",
    ),
    ("one clip column shorter", _meta(_shorten("clips", ["narration"])), "not lists of one"),
    ("a time that is text", _meta(lambda m: m["clips"]["start_s"].__setitem__(0, "1")), "finite"),
    (
        "a sentence of no clip",
        _meta(lambda m: m["sentences"]["narration_id"].__setitem__(0, "nope")),
        "names a clip",
    ),
    ("dims", _meta(lambda m: m.update(dims={"video_dim": "192"})), "its dims"),
    ("meta keys", _meta(lambda m: m.pop("pos_words")), "its meta holds"),
    ("truncated npz", _truncate, "best.npz"),
    ("empty npz", _write("best.npz", b""), "empty, not a .npz archive"),
    ("npz not a zip", _write("best.npz", b"not a zip at all"), "no zip header"),
    ("npz missing", lambda cache: (cache / "best.npz").unlink(), "not found"),
    (
        "narrower array",
        _npz(lambda a: a.update({"text/": a["text/"][:, :-1]})),
        "float32[58, 255], the manifest says float32[58, 256]",
    ),
    (
        "narrower array, manifest too",
        _agreed(lambda a: a.update({"text/": a["text/"][:, :-1]})),
        "video and text vectors are (256,) and (255,) wide",
    ),
    ("string dtype", _npz(lambda a: a.update({"video/": a["video/"].astype(str)})), "string"),
    ("int dtype", _npz(lambda a: a.update({"video/": a["video/"].astype(np.int32)})), "int32"),
    ("extra array", _npz(lambda a: a.update(extra=np.zeros(3))), "holds arrays"),
    ("manifest a list", _write("best.json", b"[]"), "not an object of key, arrays and meta"),
    ("manifest not UTF-8", _write("best.json", b'{"key": "\xff"}'), "utf-8"),
    ("manifest torn", _write("best.json", b'{"key": "best/'), "Unterminated string"),
    ("manifest nested deep", _write("best.json", b"[" * 100_000), "recursion"),
    ("manifest arrays", _manifest(lambda m: m.update(arrays=[])), "not {name: {shape, dtype}}"),
]


@pytest.mark.parametrize(
    "damage, says", [c[1:] for c in CACHE_CASES], ids=[c[0] for c in CACHE_CASES]
)
def test_a_damaged_cache_is_rebuilt_with_one_warning(
    clean, tmp_path, monkeypatch, caplog, damage, says
):
    """The rebuild is the clean gallery (`_build` itself is checked in test_retrieve): what
    is checked here is that the damaged files are not used, said once, and replaced."""
    _, run, gallery = clean
    work = _copy(clean, tmp_path)
    damage(work / "retrieval")
    built = []
    monkeypatch.setattr(Gallery, "_build", classmethod(lambda cls, r: built.append(1) or gallery))
    run = dataclasses.replace(run, workdir=work)
    with caplog.at_level(logging.WARNING):
        got = Gallery.of(run)
        again = Gallery.of(run)  # the rebuilt cache, read without a word
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and len(built) == 1, warnings
    assert f"cache {work / 'retrieval'} (best.npz, best.json)" in warnings[0]
    assert says in warnings[0], warnings[0]
    for other in (got, again):
        assert other.clips == gallery.clips and other.sentences == gallery.sentences
        assert other.dims == gallery.dims and other.pos_words == gallery.pos_words
        np.testing.assert_array_equal(other.video, gallery.video)
        np.testing.assert_array_equal(other.text, gallery.text)


def test_changed_run_files_rebuild_the_cache_without_a_warning(clean, tmp_path, caplog):
    work = _copy(clean, tmp_path)
    path = work / "config.json"
    path.write_text(path.read_text() + "\n")  # the same config: the cache must follow it
    run = TrainedRun.load(work)
    assert run.files != clean[1].files
    with caplog.at_level(logging.WARNING):
        gallery = Gallery.of(run)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    np.testing.assert_array_equal(gallery.video, clean[2].video)


def _strict_json(text: str):
    def refuse(constant):
        raise AssertionError(f"{constant} in JSON output")

    return json.loads(text, parse_constant=refuse)


def test_the_command_answers_as_the_clean_run_after_a_damaged_cache(clean, tmp_path, capsys):
    work = _copy(clean, tmp_path)
    assert retrieve.main(["--workdir", str(clean[0]), "--query", QUERY, "--json"]) == 0
    want = _strict_json(capsys.readouterr().out)
    _npz(_set("video/", slice(None), np.nan))(work / "retrieval")
    done = run_retrieve("--workdir", work, "--query", QUERY, "--json")
    assert done.returncode == 0, done.stderr
    assert _strict_json(done.stdout) == want
    warnings = [line for line in done.stderr.splitlines() if line.startswith("WARNING")]
    assert len(warnings) == 1 and "holds NaN or inf" in warnings[0], done.stderr


# -- run files: config.json, vocab.json ---------------------------------------------------

RUN_FILE_CASES = [
    ("config.json", b"[1, 2]", "config.json holds a JSON list, not the object of a run's config"),
    ("config.json", b"7", "config.json holds a JSON number"),
    ("config.json", b'{"model": "\xff"}', "config.json is not UTF-8 text (byte 11)"),
    ("config.json", b'{"model": ', "config.json: not valid JSON"),
    ("config.json", b"[" * 100_000, "config.json: not valid JSON"),
    ("config.json", b'{"model": 3, "data": {}, "eval": {}}', "'model' is a JSON number"),
    ("config.json", b'{"model": {"name": "nope"}, "data": {}}', "'eval' is nothing"),
    ("config.json", b'{"model": {"name": "x"}, "data": {}, "eval": {}}', "model.name 'x' is not"),
    ("vocab.json", b'{"words": ["\xe9"]}', "vocab.json is not UTF-8 text (byte 12)"),
    ("vocab.json", b"[]", 'vocab.json: expected {"words": [strings]}'),
    ("vocab.json", b'{"words": ["a", "b"]}', "vocabulary must start with '<pad>'"),
]


@pytest.mark.parametrize("name, data, says", RUN_FILE_CASES)
def test_damaged_run_files_are_one_error_naming_the_file(clean, tmp_path, name, data, says):
    work = _copy(clean, tmp_path)
    (work / name).write_bytes(data)
    with pytest.raises(InputError, match=None) as e:
        TrainedRun.load(work)
    message = str(e.value)
    assert says in message and str(work / name) in message and "\n" not in message, message


@pytest.fixture(scope="module")
def foreign(clean, tmp_path_factory):
    """The MME run with a JPoSE config.json (same data, another model)."""
    work = shutil.copytree(clean[0], tmp_path_factory.mktemp("foreign") / "run")
    (work / "config.json").write_text(config("epic_jpose").to_json_best_effort())
    return work


SAYS_FOREIGN = "holds another model's parameters than {work}/config.json builds"


def test_a_config_json_of_another_model_is_one_error_in_retrieve(foreign):
    run = TrainedRun.load(foreign)
    with pytest.raises(InputError) as e:
        Gallery.of(run)  # the cache is config.json's too: it is rebuilt, and refused
    message = str(e.value)
    assert SAYS_FOREIGN.format(work=foreign) in message, message
    assert "1 difference(s)" not in message and "is missing from the checkpoint" in message


def test_a_config_json_of_another_model_is_one_error_in_the_eval_job(foreign):
    with pytest.raises(InputError, match=SAYS_FOREIGN.format(work=foreign)):
        rescore.run(config(job="rescore", eval__rescore__relevances="class"), foreign)


def test_the_command_refuses_a_config_json_of_another_model_in_one_line(foreign, capsys, caplog):
    """The command's edge (`cli.run`) in this process, its log (warnings, as on its stderr)
    captured; tests/test_retrieve.py runs a bad query through a subprocess."""
    with caplog.at_level(logging.WARNING):
        code = retrieve.cli.run(retrieve.main, ["--workdir", str(foreign), "--query", QUERY])
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert code == 2 and out == "" and len(lines) == 1 and not caplog.records, err
    assert lines[0].startswith("error: checkpoint ") and "another model's" in lines[0]


# -- checkpoints: which one, and what it holds ----------------------------------------------


def _save(path, tree):
    import orbax.checkpoint as ocp

    checkpointer = ocp.StandardCheckpointer()
    checkpointer.save(path / "default", tree)
    checkpointer.wait_until_finished()


def _run_with(tmp_path, step_folder=None):
    """A workdir with config.json and, if given, checkpoints/5 made by `step_folder`."""
    work = tmp_path / "run"
    work.mkdir()
    (work / "config.json").write_text("{}")
    if step_folder:
        step_folder(work / "checkpoints" / "5")
    return work


def _garbage(folder):
    (folder / "default").mkdir(parents=True)
    (folder / "default" / "_METADATA").write_text("garbage")


CHECKPOINT_CASES = [
    (
        None,
        "auto",
        "config.train.init_from",
        "{work} has no checkpoint (no step in best/ or checkpoints/): train the run first, "
        "or pick another config.train.init_from",
    ),
    (
        _garbage,
        "best",
        "--checkpoint",
        "{work} has no best checkpoint (no step in best/): pick another --checkpoint (best, "
        "latest, auto or a step number)",
    ),
    (
        _garbage,
        "newest",
        "config.eval.rescore.checkpoint",
        "config.eval.rescore.checkpoint = 'newest': use best, latest, auto or a step number",
    ),
    (
        _garbage,
        "7",
        "--checkpoint",
        "--checkpoint '7': {work} has no checkpoint of step 7 (it has steps [5])",
    ),
    (
        _garbage,
        "auto",
        "config.train.init_from",
        "cannot read checkpoint {work}/checkpoints/5 (",
    ),
    (
        lambda f: _save(f, {"params": {"w": np.array([1.0, np.nan], np.float32)}}),
        "latest",
        "--checkpoint",
        "checkpoint {work}/checkpoints/5 holds non-finite parameters (w): pick another "
        "--checkpoint (best",
    ),
    (
        lambda f: _save(f, {"step": np.zeros(())}),
        "5",
        "config.eval.rescore.checkpoint",
        "checkpoint {work}/checkpoints/5 holds no model parameters ('params'): pick another "
        "config.eval.rescore.checkpoint (best",
    ),
]


@pytest.mark.parametrize("step_folder, which, flag, says", CHECKPOINT_CASES)
def test_checkpoint_errors_name_the_flag_or_key_the_user_set(
    tmp_path, step_folder, which, flag, says
):
    work = _run_with(tmp_path, step_folder)
    with pytest.raises(InputError) as e:
        found = find_checkpoint(work, which, flag=flag)
        restore_params(found, flag)
    message = str(e.value)
    assert says.format(work=work) in message and "  " not in message, message
    assert flag in message and ("--checkpoint" in message) == (flag == "--checkpoint")

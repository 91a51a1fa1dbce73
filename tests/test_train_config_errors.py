"""A run starts cleanly or leaves its workdir as it found it.

Table: every bad config value, workdir and config file is one error line and no change
under the test folder: through `python -m jaxsvr.main` (exit code 2, one `error:` line, no
traceback; the test folder is the working directory, so an empty `--workdir` writing into
the current folder would show) for the rows of `SUBPROCESS_ROWS`, in-process (the
InputError `jaxsvr.main` prints) for the rest. Then the workdir lock
(a second trainer on a busy workdir), rerunning a finished run (metrics.jsonl unchanged),
resuming over a damaged metrics.jsonl, and the mode of exported .npy files.
"""

from __future__ import annotations

import ast
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from train_runs import ROOT, cpu_env, jsonl, train_losses

from jaxsvr import annotations, configs
from jaxsvr.errors import InputError
from jaxsvr.runtime.workdir import Workdir
from jaxsvr.train import loop, pipeline

CONFIG = f"{ROOT}/configs/epic_jpose.py:runlocal"
CONTRA = f"{ROOT}/configs/epic_contra.py:runlocal"
POS = f"{ROOT}/configs/youcook2_mme.py:runlocal,proxy=pos"


def main(workdir, *flags, config=CONFIG, cwd=ROOT, timeout=300, **popen):
    """Runs `python -m jaxsvr.main` on CPU; returns the CompletedProcess."""
    command = [sys.executable, "-m", "jaxsvr.main", f"--config={config}", f"--workdir={workdir}"]
    return subprocess.run(
        [*command, *flags],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env=cpu_env(),
        **popen,
    )


def one_error_line(r) -> str:
    assert r.returncode == 2, r.stderr[-3000:]
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    errors = [line for line in r.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, r.stderr[-3000:]
    return errors[0]


def tree(folder: Path) -> dict[str, tuple]:
    """Every path under `folder` with its kind, and size and mtime for files."""
    out = {}
    for path in sorted(folder.rglob("*")):
        st = path.lstat()
        is_file = path.is_file() and not path.is_symlink()
        out[str(path.relative_to(folder))] = (st.st_size, st.st_mtime_ns) if is_file else "dir"
    return out


# (id, config overrides, where the workdir is, words the error line must hold)
BAD_VALUES = [
    ("batch_size_0", ["--config.train.batch_size=0"], "new", "train.batch_size = 0"),
    ("batch_size_negative", ["--config.train.batch_size=-4"], "existing", "batch_size = -4"),
    ("log_every_0", ["--config.train.log_every_steps=0"], "existing", "log_every_steps"),
    ("eval_every_0", ["--config.eval.every_epochs=0"], "existing", "eval.every_epochs"),
    ("test_videos_0", ["--config.data.test_videos=0"], "new", "data.test_videos"),
    ("num_videos_0", ["--config.data.num_videos=0"], "new", "data.num_videos"),
    ("clips_per_video_0", ["--config.data.clips_per_video=0"], "new", "clips_per_video"),
    ("num_epochs_0", ["--config.train.num_epochs=0"], "existing", "train.num_epochs"),
    ("max_steps_negative", ["--config.train.max_steps=-1"], "new", "train.max_steps"),
    ("prefetch_0", ["--config.train.prefetch=0"], "new", "train.prefetch"),
    ("gather_unknown", ["--config.train.gather=disk"], "new", "train.gather"),
    ("ckpt_every_0", ["--config.checkpoint.every_steps=0"], "existing", "every_steps"),
    ("ckpt_keep_0", ["--config.checkpoint.keep=0"], "new", "checkpoint.keep"),
    ("best_metric_unknown", ["--config.checkpoint.best_metric=ndcg"], "existing", "'ndcg'"),
    ("best_metric_lower_better", ["--config.checkpoint.best_metric=medr_t2v"], "new", "medr"),
    ("lr_nan", ["--config.optimizer.lr=nan"], "existing", "optimizer.lr"),
    ("lr_negative", ["--config.optimizer.lr=-0.1"], "new", "optimizer.lr"),
    ("momentum_negative", ["--config.optimizer.momentum=-0.5"], "new", "optimizer.momentum"),
    ("num_triplets_0", ["--config.sampler.num_triplets=0"], "new", "num_triplets"),
    ("eval_threshold_0", ["--config.eval.threshold=0.0"], "new", "eval.threshold"),
    ("eval_backend_unknown", ["--config.eval.backend=gpu"], "existing", "eval.backend"),
    ("eval_chunk_0", ["--config.eval.chunk=0"], "new", "eval.chunk"),
    ("mesh_data_0", ["--config.mesh.data=0"], "new", "mesh.data"),
    ("seed_negative", ["--config.seed=-1"], "new", "config.seed"),
    ("embed_dim_0", ["--config.model.embed_dim=0"], "new", "model.embed_dim"),
    ("level_weight_negative", ["--config.loss.level_weights.verb=-1.0"], "new", "verb"),
    ("features_of_two_widths", ["FEATURES"], "existing", "48 per row but test ones 32"),
    ("features_of_width_0", ["FEATURES_0"], "new", "width of at least 1"),
    ("fixed_margin_nan", ["--config.loss.fixed_margin=nan"], "new", "loss.fixed_margin = nan"),
    ("fixed_margin_inf", ["--config.loss.fixed_margin=inf"], "existing", "fixed_margin = inf"),
    ("fixed_margin_negative", ["--config.loss.fixed_margin=-0.5"], "new", "fixed_margin"),
    ("eval_threshold_inf", ["--config.eval.threshold=inf"], "new", "eval.threshold = inf"),
    (
        "temperature_0",
        [f"CONFIG={CONTRA}", "--config.loss.cross_modal_nce.temperature=0.0"],
        "new",
        "loss.cross_modal_nce.temperature = 0.0",
    ),
    ("ran_tau_0", ["--config.loss.ran.tau=0.0"], "new", "loss.ran.tau"),
    (
        "relevance_weights_one",
        [f"CONFIG={POS}", "--config.data.relevance.weights=(0.5,)"],
        "new",
        "data.relevance.weights 0.5: use two weights",
    ),
    (
        "relevance_weights_negative",
        [f"CONFIG={POS}", "--config.data.relevance.weights=(-0.5,1.0)"],
        "existing",
        "non-negative",
    ),
    (
        "relevance_weights_sum_2",
        [f"CONFIG={POS}", "--config.data.relevance.weights=(1.0,1.0)"],
        "new",
        "sum to 2 > 1",
    ),
    ("relevance_rho_0", [f"CONFIG={POS}", "--config.data.relevance.rho=0.0"], "new", "rho"),
    ("relevance_proxy_unknown", ["--config.data.relevance.proxy=bleu"], "new", "'bleu'"),
    ("seed_too_big", ["--config.seed=99999999999999999999"], "new", "[0, 4294967295]"),
    ("data_seed_too_big", ["--config.data.seed=4294967296"], "new", "config.data.seed"),
    (
        "heads_not_dividing_width",
        [f"CONFIG={CONTRA}", "--config.model.video_heads=3"],
        "new",
        "config.model.embed_dim = 32 is not divisible by config.model.video_heads = 3",
    ),
    (
        "val_videos_and_fraction",
        ["--config.data.val_videos=2", "--config.data.val_fraction=0.2"],
        "new",
        "give one of them",
    ),
    ("val_fraction_1", ["--config.data.val_fraction=1.0"], "new", "data.val_fraction"),
    ("val_all_videos", ["--config.data.val_videos=6"], "existing", "leaves no training video"),
    ("early_stop_no_val", ["--config.train.early_stop_evals=3"], "new", "validation split"),
    # names, checked against the choices of the stage that reads them (checks.CHOICES)
    ("precision_unknown", ["--config.matmul_precision=fast"], "new", "matmul_precision 'fast'"),
    ("format_unknown", ["--config.data.format=youtube"], "new", "data.format 'youtube'"),
    ("train_captions_unknown", ["--config.data.train_captions=some"], "new", "'all' = every"),
    ("train_relevance_unknown", ["--config.data.train_relevance=both"], "new", "'both'"),
    ("pos_source_unknown", ["--config.data.pos_source=nltk"], "new", "data.pos_source 'nltk'"),
    ("model_unknown", ["--config.model.name=clip"], "new", "config.model.name 'clip'"),
    ("text_input_unknown", ["--config.model.text_input=glove"], "new", "text_input 'glove'"),
    ("loss_unknown", ["--config.loss.name=arcface"], "existing", "loss.name 'arcface'"),
    ("margin_unknown", ["--config.loss.margin=soft"], "new", "config.loss.margin 'soft'"),
    ("distance_unknown", ["--config.loss.distance=l1"], "new", "config.loss.distance 'l1'"),
    ("pair_type_unknown", ["--config.loss.pair_weights.xv=1.0"], "new", "pair_weights.xv"),
    ("pairing_unknown", ["--config.sampler.pairing=random"], "new", "pairing 'random'"),
    ("positives_unknown", ["--config.sampler.positives=maybe"], "new", "positives 'maybe'"),
    ("optimizer_unknown", ["--config.optimizer.name=lamb"], "new", "optimizer.name 'lamb'"),
    ("schedule_unknown", ["--config.optimizer.schedule=step"], "new", "schedule 'step'"),
    ("eval_positives_unknown", ["--config.eval.positives=instance"], "new", "eval.positives"),
    # values that must fit each other, and sections checked by their own spec
    (
        "relevant_pairing_with_triplets",
        ["--config.sampler.pairing=relevant"],
        "new",
        "config.sampler.pairing = 'relevant' does not fit config.loss.name = 'triplet'",
    ),
    (
        "final_lr_above_lr",
        ["--config.optimizer.schedule=warmup_cosine", "--config.optimizer.final_lr=0.5"],
        "new",
        "final_lr = 0.5 is above config.optimizer.lr = 0.01",
    ),
    ("synthetic_block_0", ["--config.data.synthetic.block_dim=0"], "new", "config.data.synthetic:"),
    ("synthetic_text_dim_0", ["--config.data.synthetic_text.dim=0"], "new", "synthetic_text: dim"),
    ("modalities_unknown", ["--config.data.modalities=depth"], "new", "modalities = 'depth'"),
    ("missing_config_file", ["CONFIG=configs/nope.py"], "new", "configs/nope.py"),
    ("workdir_empty", [], "empty", "--workdir is empty"),
    ("workdir_is_a_file", [], "file", "is a file"),
    ("workdir_under_a_file", [], "under_file", "which is a file"),
    ("workdir_not_writable", [], "unwritable", "not writable"),
]


# The command-line contract (exit code 2, one `error:` line, nothing written) on a few rows
# in subprocesses: a workdir problem, a missing config file, a range and a data check; the
# other rows are the same code path (`check_train` / `check_data` / `workdir.check` raising
# InputError before the workdir is touched, `jaxsvr.main` printing it) and run in-process
# below.
SUBPROCESS_ROWS = {
    "batch_size_0",
    "features_of_two_widths",
    "missing_config_file",
    "workdir_not_writable",
}


def _setup(tmp_path, flags, where):
    """(workdir, config spec, flags) of a BAD_VALUES row, its files made under tmp_path."""
    workdir = tmp_path / "run"
    if where == "existing":
        workdir.mkdir()
        (workdir / "notes.txt").write_text("mine\n")
    elif where == "empty":
        workdir = ""
    elif where == "file":
        workdir.write_text("not a folder\n")
    elif where == "under_file":
        (tmp_path / "file").write_text("not a folder\n")
        workdir = tmp_path / "file" / "run"
    elif where == "unwritable":  # sysfs takes no new files, not even from root
        workdir = Path("/sys/jaxsvr_test_run")
    config = CONFIG
    if flags in (["FEATURES"], ["FEATURES_0"]):  # real features: train 48-d, test 32-d
        width = (48, 32) if flags == ["FEATURES"] else (0, 0)  # or none at all
        feats = tmp_path / "features"
        feats.mkdir()
        np.save(feats / "train.npy", np.ones((120, width[0]), np.float32))
        np.save(feats / "test.npy", np.ones((60, width[1]), np.float32))
        flags = [f"--config.data.features={feats}"]
    elif flags and flags[0].startswith("CONFIG="):
        config, flags = flags[0].removeprefix("CONFIG="), flags[1:]
    return workdir, config, flags


def _value(text: str):
    """A flag value as ml_collections reads it: a Python literal, a float (nan, inf), or a
    string."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        try:
            return float(text)
        except ValueError:
            return text


@pytest.mark.parametrize(
    "flags, where, expect",
    [row[1:] for row in BAD_VALUES if row[0] in SUBPROCESS_ROWS],
    ids=[row[0] for row in BAD_VALUES if row[0] in SUBPROCESS_ROWS],
)
def test_bad_value_is_one_line_exit_2_and_changes_nothing(tmp_path, flags, where, expect):
    workdir, config, flags = _setup(tmp_path, flags, where)
    before = tree(tmp_path)

    line = one_error_line(main(workdir, *flags, config=config, cwd=tmp_path))

    assert expect in line, line
    assert tree(tmp_path) == before
    assert not Path("/sys/jaxsvr_test_run").exists()


@pytest.mark.parametrize(
    "flags, where, expect",
    [row[1:] for row in BAD_VALUES if row[0] not in SUBPROCESS_ROWS],
    ids=[row[0] for row in BAD_VALUES if row[0] not in SUBPROCESS_ROWS],
)
def test_bad_value_in_process_is_one_line_and_changes_nothing(tmp_path, flags, where, expect):
    workdir, config, flags = _setup(tmp_path, flags, where)
    overrides = {}
    for flag in flags:
        key, _, text = flag.removeprefix("--config.").partition("=")
        overrides[key.replace(".", "__")] = _value(text)
    before = tree(tmp_path)

    with pytest.raises(InputError) as e:
        loop.train_and_evaluate(configs.from_file(config, **overrides), workdir)

    line = str(e.value)
    assert "\n" not in line and expect in line, line
    assert tree(tmp_path) == before


def test_every_checked_format_has_a_loader():
    """check_train takes the annotations stage's format names; the pipeline loads each."""
    assert tuple(pipeline.FORMATS) == annotations.FORMATS


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_read_only_workdir_is_one_line(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir(mode=0o555)
    try:
        line = one_error_line(main(folder / "run"))
        assert "not writable" in line
        assert not list(folder.iterdir())
    finally:
        folder.chmod(0o755)


def test_workdir_lock_in_process(tmp_path):
    with Workdir(tmp_path / "run") as first:
        first.open()
        with pytest.raises(InputError, match=f"in use by another run \\(pid {os.getpid()} "):
            Workdir(tmp_path / "run").open()
    with Workdir(tmp_path / "run") as again:  # released on close
        again.open()


def test_second_trainer_on_a_busy_workdir_exits_2_naming_the_first(tmp_path):
    """The first trainer in a subprocess holds the lock; the second, in this process, is
    refused with the InputError whose first line `jaxsvr.main` prints (exit code 2)."""
    workdir = tmp_path / "run"
    long_run = ("--config.train.num_epochs=2000", "--config.checkpoint.every_steps=100000")
    command = [sys.executable, "-m", "jaxsvr.main", f"--config={CONFIG}", f"--workdir={workdir}"]
    first = subprocess.Popen(
        [*command, *long_run],
        cwd=ROOT,
        env=cpu_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        lock = workdir / ".lock"
        deadline = time.time() + 240
        while time.time() < deadline and first.poll() is None:
            if lock.is_file() and lock.read_text().strip():
                break
            time.sleep(0.05)
        assert first.poll() is None, "the first trainer ended early"
        second = configs.from_file(CONFIG, train__num_epochs=2000, checkpoint__every_steps=100000)
        with pytest.raises(InputError) as e:
            loop.train_and_evaluate(second, workdir)
        assert first.poll() is None, "the first trainer ended before the second was refused"
        line = str(e.value).splitlines()[0]
        assert f"workdir {workdir} is in use by another run (pid {first.pid} " in line
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A finished runlocal run that exported its test similarity, under umask 027."""
    workdir = tmp_path_factory.mktemp("finished") / "run"
    r = main(workdir, "--config.eval.export_similarity=True", umask=0o027)
    assert r.returncode == 0, r.stderr[-3000:]
    return workdir


def test_exported_npy_files_follow_the_umask(finished):
    for name in ("test_similarity.npy", "test_relevance.npy", "config.json", "vocab.json"):
        assert (finished / name).stat().st_mode & 0o777 == 0o640, name
    assert not list(finished.glob(".*.tmp"))


# The reruns of the finished run below are in-process: the same config, the same programs.
EXPORTING = dict(eval__export_similarity=True)


def test_rerunning_a_finished_run_leaves_metrics_jsonl_as_it_was(finished, tmp_path):
    workdir = tmp_path / "run"
    shutil.copytree(finished, workdir)
    before = (workdir / "metrics.jsonl").read_bytes()
    loop.train_and_evaluate(configs.from_file(CONFIG, **EXPORTING), workdir)
    assert (workdir / "metrics.jsonl").read_bytes() == before
    final = json.loads((workdir / "metrics.json").read_text())
    first = json.loads((finished / "metrics.json").read_text())
    for key in ("ndcg_avg", "map_avg", "rsum", "step", "train_steps", "train_seconds"):
        assert final[key] == first[key], key  # the training's own summary is kept


def test_resume_over_non_utf8_bytes_in_metrics_jsonl(finished, tmp_path, caplog):
    workdir = tmp_path / "run"
    shutil.copytree(finished, workdir)
    steps = sorted(int(p.name) for p in (workdir / "checkpoints").iterdir())
    shutil.rmtree(workdir / "checkpoints" / str(steps[-1]))  # resume from the one before
    with (workdir / "metrics.jsonl").open("ab") as f:
        f.write(b'{"step": 3, "train/loss": \xff\xfe\x80}\n\xc3\x28 torn')
    with caplog.at_level(logging.INFO):  # the log `jaxsvr.main` writes to stderr
        loop.train_and_evaluate(configs.from_file(CONFIG, **EXPORTING), workdir)
    assert f"resumed from {workdir / 'checkpoints'} at step {steps[-2]}" in caplog.text
    assert "dropping 2 unreadable line(s)" in caplog.text
    assert [row["step"] for row in jsonl(workdir)] == [row["step"] for row in jsonl(finished)]
    assert train_losses(workdir) == train_losses(finished)

"""The main command end to end (subprocesses): smoke run, resume after SIGKILL and after
SIGTERM's checkpoint, fake devices, and one-line errors with exit codes (bad inputs its
training finds, whose line is the first line of an InputError, in-process)."""

import json
import re
import signal
import subprocess
from pathlib import Path

import numpy as np
import pytest
from train_runs import (
    ROOT,
    config,
    cpu_env,
    final,
    jsonl,
    main_command,
    run_main,
    train_losses,
    wait_for_checkpoint,
    wait_until,
)

from jaxsvr.errors import InputError
from jaxsvr.runtime import process_tuning
from jaxsvr.train import loop

RUN = ("--config.train.num_epochs=6",)  # 42 steps, checkpoints every 5, evals every 2 epochs
# the command's process as users run it (threefry unrolled; the suite's processes keep
# JAX's loop, tests/conftest.py): the reference run and the runs compared with it bit for bit
USERS = {"JAXSVR_THREEFRY": "unrolled"}


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """One uninterrupted runlocal JPoSE run on 1 device, its process set up as users' are
    (threefry unrolled: the suite's other processes keep JAX's loop, tests/conftest.py)."""
    workdir = tmp_path_factory.mktemp("reference")
    r = run_main(workdir, *RUN, environ=USERS)
    assert r.returncode == 0, r.stderr[-3000:]
    return workdir, r.stderr


def test_smoke_runlocal(reference):
    workdir, log = reference
    first = log.splitlines()
    # the first screen says what runs, on which devices and data, where outputs go; no
    # backend probe ("Unable to initialize backend 'tpu'") that reads like a failure
    assert "jaxsvr train: config configs/epic_jpose.py:runlocal" in first[0]
    # the process settings the command made: threefry unrolled, and the huge-page restart
    # exactly where the machine needs it (jaxsvr.runtime.process_tuning)
    env = cpu_env()
    tunables = (process_tuning.huge_page_environment(env) or env).get("GLIBC_TUNABLES") or "none"
    assert first[1].endswith(f"process: threefry unrolled on the CPU; malloc tunables {tunables}")
    assert "devices: 1 cpu" in first[2] and f"outputs in {workdir}" in first[2]
    assert "Unable to initialize backend" not in log
    assert any("built-in synthetic kitchen annotations" in line for line in first[:5])
    assert "nothing is downloaded" in log and "features: synthetic" in log
    m = final(workdir)
    assert m["step"] == 42 and 0 < m["ndcg_avg"] <= 1 and 0 < m["map_avg"] <= 1
    assert {"r1_t2v", "r10_v2t", "medr_t2v", "rsum", "steps_per_sec", "host_wait"} <= set(m)
    losses = train_losses(workdir)
    assert losses[max(losses)] < losses[min(losses)]  # it learns
    rows = jsonl(workdir)
    assert {"train/verb_tv", "train/noun_vv", "train/action_tt"} <= set(rows[0])
    assert any("test/ndcg_avg" in r for r in rows)
    assert json.loads((workdir / "config.json").read_text())["model"]["name"] == "jpose"
    assert (workdir / "vocab.json").is_file()
    assert list((workdir / "tensorboard").glob("events.out.tfevents.*"))
    assert sorted(p.name for p in (workdir / "checkpoints").iterdir()) == ["40", "42"]
    assert len(list((workdir / "best").iterdir())) == 1


def test_resume_after_sigkill_and_after_sigterm_matches_uninterrupted(reference, tmp_path):
    """SIGKILL after the first checkpoint; the rerun, sent SIGTERM (a scheduler's) once it
    has saved a newer one, saves the step it reached and exits 143 with one line; the next
    rerun resumes there and ends as the uninterrupted run: its metrics, every logged loss
    and the JSON lines of the killed and stopped parts rewound."""
    ckpts = tmp_path / "checkpoints"

    def newest() -> int:
        return max((int(p.name) for p in ckpts.iterdir() if p.name.isdigit()), default=0)

    proc = subprocess.Popen(
        main_command(tmp_path, *RUN),
        cwd=ROOT,
        env={**cpu_env(), **USERS},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_for_checkpoint(proc, tmp_path)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (tmp_path / "metrics.json").exists(), "the run ended before it was killed"
    killed_at = newest()
    assert 5 <= killed_at < 42

    log = tmp_path / "stderr.txt"
    with open(log, "w") as err:
        proc = subprocess.Popen(
            main_command(tmp_path, *RUN),
            cwd=ROOT,
            env={**cpu_env(), **USERS},
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
        try:
            wait_until(proc, lambda: newest() > killed_at)
            proc.send_signal(signal.SIGTERM)
            code = proc.wait(timeout=120)
        finally:
            proc.kill()
    stderr = log.read_text()
    assert code == 143, stderr[-3000:]
    assert not (tmp_path / "metrics.json").exists(), "the run ended before the signal"
    stopped = [line for line in stderr.splitlines() if line.startswith("stopped: ")]
    assert len(stopped) == 1, stderr[-3000:]
    saved = newest()
    assert f"after step {saved}, saved as checkpoint {saved}" in stopped[0]
    assert killed_at < saved < 42

    r = run_main(tmp_path, *RUN, environ=USERS)
    assert r.returncode == 0, r.stderr[-3000:]
    assert f"resumed from {ckpts} at step {saved}" in r.stderr
    want, got = final(reference[0]), final(tmp_path)
    for key in ("ndcg_avg", "map_avg", "rsum", "ndcg_v2t", "map_t2v"):
        assert got[key] == want[key], key
    assert train_losses(tmp_path) == train_losses(reference[0])
    assert [r["step"] for r in jsonl(tmp_path)] == [r["step"] for r in jsonl(reference[0])]


def test_eight_fake_devices_follow_the_one_device_loss_curve(reference, tmp_path):
    r = run_main(tmp_path, *RUN, devices=8)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "on 8 device(s)" in r.stderr
    want, got = train_losses(reference[0]), train_losses(tmp_path)
    assert want.keys() == got.keys()
    np.testing.assert_allclose([got[s] for s in want], [want[s] for s in want], rtol=0, atol=1e-5)


def test_the_log_names_the_reserved_huge_pages(tmp_path):
    """`JAXSVR_HUGE_PAGES=reserved`: the command restarts with glibc.malloc.hugetlb=2 where
    it can, and its process line names the pool, whatever this machine has reserved
    (none: a warning says how to reserve some). The run stops at its missing
    annotations, before any training, so it takes next to nothing from a pool."""
    environ = {"JAXSVR_HUGE_PAGES": "reserved"}
    r = run_main(tmp_path / "run", "--config.data.annotations=/no/such/folder", environ=environ)
    assert r.returncode == 2 and "/no/such/folder" in r.stderr, r.stderr[-3000:]
    env = {**cpu_env(), **environ}
    restarted = process_tuning.huge_page_environment(env)
    tunables = (restarted or env).get("GLIBC_TUNABLES") or "none"
    line = next(x for x in r.stderr.splitlines() if "process: threefry" in x)
    assert f"malloc tunables {tunables}" in line, line
    if restarted is not None and process_tuning.reserved_huge_pages() is not None:
        assert re.search(r"; reserved huge pages: \d+ of \d+ available$", line), line
    if restarted is None:  # an old glibc, say: the command says it did not restart
        assert "JAXSVR_HUGE_PAGES=reserved is not applied" in r.stderr


def test_batch_loss_on_eight_fake_devices_follows_one_device(tmp_path):
    """A [B, B] loss of a sharded batch (SMS over heads, relevant-caption pairing); ConTra's
    is in tests/test_train_contra.py."""
    arg = "configs/epic_sms.py:sms,runlocal"
    one_dir = tmp_path / "one"
    one = run_main(one_dir, "--config.train.num_epochs=2", config_arg=arg)
    assert one.returncode == 0, one.stderr[-3000:]
    eight = run_main(tmp_path / "eight", "--config.train.num_epochs=2", config_arg=arg, devices=8)
    assert eight.returncode == 0, eight.stderr[-3000:]
    assert "on 8 device(s)" in eight.stderr
    want, got = train_losses(one_dir), train_losses(tmp_path / "eight")
    assert want.keys() == got.keys()
    np.testing.assert_allclose([got[s] for s in want], [want[s] for s in want], rtol=0, atol=1e-5)


def one_line_error(r, code=2):
    assert r.returncode == code, r.stderr[-2000:]
    errors = [line for line in r.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, r.stderr[-2000:]
    return errors[0]


@pytest.mark.parametrize(
    "flags, config_arg, expect",
    [
        (("--config.train.bach_size=3",), "configs/epic_jpose.py:runlocal", "bach_size"),
        ((), "configs/epic_jpose.py:margin=soft", "margin"),
    ],
)
def test_bad_config_is_one_line_exit_2(tmp_path, flags, config_arg, expect):
    line = one_line_error(run_main(tmp_path, *flags, config_arg=config_arg))
    assert expect in line


def training_error(workdir, name, arg, **overrides) -> str:
    """What `python -m jaxsvr.main` prints after `error: ` for a bad input its training
    finds: the first line of the InputError (or missing file), here in-process."""
    with pytest.raises((InputError, FileNotFoundError)) as e:
        loop.train_and_evaluate(config(name, arg, **overrides), workdir)
    return str(e.value).splitlines()[0]


@pytest.mark.parametrize(
    "arg, overrides, expect",
    [
        (None, dict(data__annotations="/nonexistent"), "/nonexistent"),
        ("runlocal", dict(matmul_precision="fast"), "matmul_precision"),
    ],
)
def test_bad_config_found_by_the_training(tmp_path, arg, overrides, expect):
    assert expect in training_error(tmp_path, "epic_jpose", arg, **overrides)


def test_features_that_disagree_with_annotations(tmp_path):
    feats = tmp_path / "features"
    feats.mkdir()
    np.save(feats / "train.npy", np.zeros((7, 192), np.float32))
    np.save(feats / "test.npy", np.zeros((60, 192), np.float32))
    line = training_error(tmp_path / "run", "epic_jpose", "runlocal", data__features=str(feats))
    assert "train.npy" in line and "7" in line and "120" in line
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_non_finite_loss_stops_with_the_step(tmp_path):
    # Momentum 1000 blows the state up within a few steps (after step 15's update on
    # runlocal); the checks before training accept it (momentum >= 1 is left to this check).
    # In-process: the line `jaxsvr.main` prints (exit code 1, as a subprocess in
    # tests/test_checkpoint_faults.py, whose diverging run this is: one program).
    c = config("epic_jpose", "runlocal", optimizer__momentum=1000.0, checkpoint__every_steps=1)
    with pytest.raises(loop.TrainingDiverged) as e:
        loop.train_and_evaluate(c, tmp_path)
    line = str(e.value).splitlines()[0]
    assert "non-finite" in line and "step" in line, line
    assert "last good checkpoint: step " in line and "a rerun resumes from it" in line, line
    assert "Lower config.optimizer.lr" in line and "need a new workdir" in line, line
    assert "set grad_clip" not in line, line
    assert not (tmp_path / "metrics.json").exists()


def test_eval_demo_job_still_runs(tmp_path):
    r = run_main(tmp_path, "--config.job=eval_demo")
    assert r.returncode == 0, r.stderr[-2000:]
    m = json.loads(Path(tmp_path, "metrics.json").read_text())
    assert m["perfect"]["ndcg_avg"] == 1.0 and m["random"]["ndcg_avg"] < m["oracle_1"]["ndcg_avg"]

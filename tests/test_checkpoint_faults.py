"""Faults around checkpoints, end to end (the main command in subprocesses, real orbax
checkpoints): every kind of damage to the newest checkpoint falls back to the next older
one, or to scratch, with one warning and ends with the uninterrupted run's metrics; a run
whose state turns non-finite leaves only finite checkpoints, and a rerun with a saner
optimiser finishes from the last; vanished gradients draw a warning.

The reference is one finished runlocal run (28 steps: checkpoints 25 and 28, best 28);
each case damages a copy. Resumes are exact on CPU, so a rerun that falls back to 25
retrains steps 26-28 into the same final metrics.
"""

import asyncio
import gc
import logging
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
import pytest
from train_runs import ROOT, config, cpu_env, final, main_command, run_main, train_losses

from jaxsvr.checkpoints import layout, reads
from jaxsvr.checkpoints.manager import all_finite
from jaxsvr.errors import InputError
from jaxsvr.train import loop

TIMINGS = {"eval_seconds", "train_seconds", "train_steps", "steps_per_sec", "host_wait"}


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """One uninterrupted runlocal JPoSE run, and its log."""
    workdir = tmp_path_factory.mktemp("reference")
    r = run_main(workdir)
    assert r.returncode == 0, r.stderr[-3000:]
    assert sorted(p.name for p in (workdir / "checkpoints").iterdir()) == ["25", "28"]
    assert [p.name for p in (workdir / "best").iterdir()] == ["28"]
    return workdir, r.stderr


def _largest_data_file(step_dir: Path) -> Path:
    files = (step_dir / "default" / "ocdbt.process_0" / "d").iterdir()
    return max(files, key=lambda p: p.stat().st_size)


def _truncate(step_dir: Path) -> None:
    data = _largest_data_file(step_dir)
    data.write_bytes(data.read_bytes()[: data.stat().st_size // 2])


def _garble_data(step_dir: Path) -> None:
    data = _largest_data_file(step_dir)
    rng = np.random.default_rng(0)
    data.write_bytes(rng.integers(0, 256, data.stat().st_size, dtype=np.uint8).tobytes())


def _garble(name: str):
    def garble(step_dir: Path) -> None:
        (step_dir / name).write_bytes(b"\x00\xffnot json{")

    return garble


def _remove(name: str):
    def remove(step_dir: Path) -> None:
        path = step_dir / name
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink()

    return remove


def _empty(step_dir: Path) -> None:
    shutil.rmtree(step_dir)
    step_dir.mkdir()


def _non_finite(step_dir: Path) -> None:
    """A diverged state, as older versions saved one: rewritten with orbax, one NaN."""
    manager = ocp.CheckpointManager(step_dir.parent, item_handlers=ocp.StandardCheckpointHandler())
    step = int(step_dir.name)
    tree = jax.tree.map(np.array, manager.restore(step, args=ocp.args.StandardRestore()))
    tree["params"]["params"]["video_verb"]["proj"]["kernel"][0, 0] = np.nan
    manager.delete(step)
    manager.save(step, args=ocp.args.StandardSave(tree))
    manager.wait_until_finished()
    manager.close()


DAMAGE = {
    "truncated data file": _truncate,
    "garbage data file": _garble_data,
    "garbage _CHECKPOINT_METADATA": _garble("_CHECKPOINT_METADATA"),
    "garbage default/_METADATA": _garble("default/_METADATA"),
    "missing default/": _remove("default"),
    "missing default/manifest.ocdbt": _remove("default/manifest.ocdbt"),
    "emptied step folder": _empty,
    "non-finite state": _non_finite,
}


def _copy(reference, tmp_path) -> Path:
    workdir = tmp_path / "run"
    shutil.copytree(reference[0], workdir)
    return workdir


def _unusable_warnings(log: str) -> list[str]:
    return [line for line in log.splitlines() if line.startswith("W") and "is unusable" in line]


def _assert_same_run(workdir: Path, reference: Path) -> None:
    want, got = final(reference), final(workdir)
    assert {k: v for k, v in got.items() if k not in TIMINGS} == {
        k: v for k, v in want.items() if k not in TIMINGS
    }
    assert train_losses(workdir) == train_losses(reference)


@pytest.mark.parametrize("kind", list(DAMAGE))
def test_damaged_newest_checkpoint_falls_back_to_the_older(reference, tmp_path, kind):
    workdir = _copy(reference, tmp_path)
    DAMAGE[kind](workdir / "checkpoints" / "28")
    r = run_main(workdir)
    assert r.returncode == 0, r.stderr[-3000:]
    # one warning and no other noise (orbax's abandoned reads used to print tracebacks)
    others = [line for line in r.stderr.splitlines() if not line.startswith("I")]
    assert len(others) == 1, r.stderr[-3000:]
    (warning,) = others
    assert warning in _unusable_warnings(r.stderr)
    assert f"{workdir / 'checkpoints' / '28'} is unusable" in warning
    assert "resumed from" in r.stderr and "at step 25" in r.stderr
    _assert_same_run(workdir, reference[0])
    assert sorted(p.name for p in (workdir / "checkpoints").iterdir()) == ["25", "28"]
    (aside,) = (workdir / "unusable").iterdir()
    assert aside.name.startswith("checkpoints-28-") and aside.name in warning


def test_no_usable_checkpoint_trains_from_scratch_and_a_rerun_is_quiet(reference, tmp_path):
    workdir = _copy(reference, tmp_path)
    _truncate(workdir / "checkpoints" / "28")
    _empty(workdir / "checkpoints" / "25")
    r = run_main(workdir)
    assert r.returncode == 0, r.stderr[-3000:]
    assert len(_unusable_warnings(r.stderr)) == 2
    assert "no usable checkpoint is left" in r.stderr and "training starts from scratch" in r.stderr
    assert "resumed" not in r.stderr
    _assert_same_run(workdir, reference[0])

    again = run_main(workdir)  # the damaged folders are out of the way: nothing to warn
    assert again.returncode == 0, again.stderr[-3000:]
    assert not _unusable_warnings(again.stderr) and "at step 28" in again.stderr
    assert len(list((workdir / "unusable").iterdir())) == 2


def test_damaged_best_checkpoint_is_moved_aside(reference, tmp_path):
    # orbax reads best/'s metrics when its manager starts: garbage there used to stop it
    workdir = _copy(reference, tmp_path)
    _garble("metrics/metrics")(workdir / "best" / "28")
    r = run_main(workdir)
    assert r.returncode == 0, r.stderr[-3000:]
    (warning,) = _unusable_warnings(r.stderr)
    assert f"{workdir / 'best' / '28'} is unusable" in warning and "metrics" in warning
    assert "at step 28" in r.stderr  # checkpoints/28 is fine: nothing retrained
    _assert_same_run(workdir, reference[0])


def test_damaged_best_and_newest_are_both_replaced(reference, tmp_path):
    workdir = _copy(reference, tmp_path)
    _truncate(workdir / "best" / "28")
    _truncate(workdir / "checkpoints" / "28")
    r = run_main(workdir)
    assert r.returncode == 0, r.stderr[-3000:]
    assert len(_unusable_warnings(r.stderr)) == 2 and "at step 25" in r.stderr
    _assert_same_run(workdir, reference[0])
    assert [p.name for p in (workdir / "best").iterdir()] == ["28"]  # saved again


def test_checkpoint_of_another_config_is_one_line(reference, tmp_path):
    """In-process: the InputError whose first line `jaxsvr.main` prints (exit code 2)."""
    workdir = _copy(reference, tmp_path)
    before = {name: (workdir / name).read_bytes() for name in ("config.json", "vocab.json")}
    with pytest.raises(InputError) as e:
        loop.train_and_evaluate(config("epic_jpose", "runlocal", model__embed_dim=64), workdir)
    assert before == {name: (workdir / name).read_bytes() for name in before}  # as it was
    line = str(e.value).splitlines()[0]
    assert "/28 holds another model" in line and "256" in line and "64" in line
    assert not (workdir / "unusable").exists()
    assert sorted(p.name for p in (workdir / "checkpoints").iterdir()) == ["25", "28"]


# The repro: SGD with momentum 1000 overflows the parameters in the update of
# step 15 while the loss (computed before the update) is still finite. A checkpoint every
# step would have saved that state; a rerun with momentum 0.9 must resume and finish.
DIVERGE = ("--config.checkpoint.every_steps=1",)


def test_divergence_saves_only_finite_states_and_a_saner_rerun_finishes(tmp_path):
    r = run_main(tmp_path, *DIVERGE, "--config.optimizer.momentum=1000")
    assert r.returncode == 1, r.stderr[-3000:]
    (line,) = [line for line in r.stderr.splitlines() if line.startswith("error: ")]
    m = re.search(r"non-finite parameters .* of step (\d+); last good checkpoint: step (\d+)", line)
    assert m, line
    bad, good = int(m[1]), int(m[2])
    assert good == bad - 1
    steps = sorted(int(p.name) for p in (tmp_path / "checkpoints").iterdir())
    assert steps[-1] == good
    for step in steps:
        tree = ocp.StandardCheckpointer().restore(tmp_path / "checkpoints" / str(step) / "default")
        assert all(np.isfinite(x).all() for x in jax.tree.leaves(tree)), step
    assert not (tmp_path / "metrics.json").exists()

    r = run_main(tmp_path, *DIVERGE, "--config.optimizer.momentum=0.9")
    assert r.returncode == 0, r.stderr[-3000:]
    assert f"at step {good}" in r.stderr and "unusable" not in r.stderr
    assert final(tmp_path)["step"] == 28


def test_vanished_gradients_warn_once(reference, tmp_path):
    # lr 1e30 saturates every unit after one step: the loss freezes, the gradient is 0
    r = run_main(tmp_path, "--config.optimizer.lr=1e30")
    assert r.returncode == 0, r.stderr[-3000:]
    (warning,) = [line for line in r.stderr.splitlines() if "gradient vanished" in line]
    assert warning.startswith("W") and "config.optimizer.lr" in warning
    assert re.search(r"up to step \d+", warning)
    assert "gradient vanished" not in reference[1]


def test_all_finite():
    tree = {
        "w": jnp.ones((2, 3)),
        "count": jnp.array(3, jnp.int32),
        "none": None,
        "scalar": jnp.float32(2.0),
        "largest": jnp.full((5,), np.finfo(np.float32).max),  # 0 * x is still 0
        "half": jnp.ones(4, jnp.bfloat16),
        "kernel": jnp.ones((300, 257)),  # the products' vector loops and their tails
        "empty": jnp.zeros((0, 4)),
        "no_columns": jnp.zeros((3, 0)),
    }
    check = jax.jit(all_finite)
    assert bool(all_finite(tree)) and bool(check(tree))
    for bad in (np.nan, np.inf, -np.inf):
        assert not bool(all_finite({**tree, "b": jnp.array([0.0, bad])}))
        for name in ("scalar", "largest", "half", "kernel"):
            x = np.asarray(tree[name], np.float32).copy()
            for index in {0, x.size // 2, x.size - 1}:
                x.reshape(-1)[index] = bad
                assert not bool(check({**tree, name: jnp.asarray(x, tree[name].dtype)}))
                x.reshape(-1)[index] = 1.0
    assert bool(all_finite({}))


def test_all_finite_as_a_users_step_compiles_it():
    # the suite compiles with most optimizations off (tests/conftest.py); a user's step is
    # optimized, and may run under a low matmul precision: the flag must not change
    previous = jax.config.read("jax_disable_most_optimizations")
    jax.config.update("jax_disable_most_optimizations", False)
    try:
        with jax.default_matmul_precision("bfloat16"):
            check = jax.jit(all_finite)
            big = np.full((64, 33), np.finfo(np.float32).max, np.float32)
            assert bool(check({"w": jnp.asarray(big), "b": jnp.ones(33)}))
            for bad in (np.nan, np.inf, -np.inf):
                for index in (0, big.size - 1):
                    x = big.copy()
                    x.reshape(-1)[index] = bad
                    assert not bool(check({"w": jnp.asarray(x), "b": jnp.ones(33)}))
    finally:
        jax.config.update("jax_disable_most_optimizations", previous)


def _orbax_like_restore(post_after: threading.Event | None = None) -> None:
    """orbax's read pattern in one new event loop: five array reads that complete on other
    threads (as tensorstore's do), gathered with a sixth that fails first; the loop is
    closed as soon as the gather raises. The five complete once `post_after` is set, or
    (None) right after the sixth failed, while the loop is still open."""
    failed = threading.Event()
    post_after = post_after or failed

    def finish_later(loop, future, i):
        post_after.wait(30)
        try:
            loop.call_soon_threadsafe(future.set_exception, ValueError(f"NOT_FOUND {i}"))
        except RuntimeError as e:  # what tensorstore's thread prints when it gets this
            POSTED_TO_CLOSED.append(e)

    async def read(i):
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        thread = threading.Thread(target=finish_later, args=(loop, future, i), daemon=True)
        thread.start()
        READERS.append(thread)
        return await future

    async def failing():
        await asyncio.sleep(0)
        failed.set()
        raise OSError("manifest.ocdbt missing")

    async def restore():
        await asyncio.gather(failing(), *(read(i) for i in range(5)))

    loop = asyncio.new_event_loop()
    try:
        with pytest.raises(OSError, match="manifest"):
            loop.run_until_complete(restore())
    finally:
        loop.close()


POSTED_TO_CLOSED: list[BaseException] = []
READERS: list[threading.Thread] = []


def test_reads_that_finish_leave_nothing_to_report(caplog):
    """Without `reads_that_finish`, the reads still in flight when the first one fails post
    into a closed loop (tracebacks on stderr); with it, the loop closes after they finish,
    and nothing is left to report, neither by the threads nor by asyncio."""
    caplog.set_level(logging.DEBUG, logger="asyncio")
    POSTED_TO_CLOSED.clear()
    released = threading.Event()
    _orbax_like_restore(released)  # the problem: reads finish after the loop closed
    released.set()
    for thread in READERS:
        thread.join(30)
    assert len(POSTED_TO_CLOSED) == 5
    assert all("Event loop is closed" in str(e) for e in POSTED_TO_CLOSED)

    POSTED_TO_CLOSED.clear()
    caplog.clear()
    with reads.reads_that_finish():
        _orbax_like_restore()  # the reads finish after the failure, in their own time
    gc.collect()
    assert POSTED_TO_CLOSED == []
    reports = [r for r in caplog.records if r.name == "asyncio" and r.levelno >= logging.WARNING]
    assert reports == []  # no "Task exception was never retrieved", no pending task destroyed
    assert type(asyncio.get_event_loop_policy()) is asyncio.DefaultEventLoopPolicy  # restored


# Every entry point that reads a checkpoint, with best/28 (the one each reads) missing its
# OCDBT manifest, the damage whose abandoned reads were loudest: one line, no traceback.
ENTRY_POINTS = {
    "retrieve": lambda w, o: [
        sys.executable,
        "-m",
        "jaxsvr.retrieve",
        "--workdir",
        str(w),
        "--query",
        "take plate",
    ],
    "rescore job": lambda w, o: main_command(
        w, "--config.job=rescore", "--config.eval.rescore.relevances=class"
    ),
    "train.init_from": lambda w, o: main_command(o, f"--config.train.init_from={w}"),
}


@pytest.mark.parametrize("entry", list(ENTRY_POINTS))
def test_a_damaged_checkpoint_is_one_error_line_at_every_entry_point(reference, tmp_path, entry):
    workdir = _copy(reference, tmp_path)
    _remove("default/manifest.ocdbt")(workdir / "best" / "28")
    r = subprocess.run(
        ENTRY_POINTS[entry](workdir, tmp_path / "new"),
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env=cpu_env(),
    )
    assert r.returncode == 2, r.stderr[-3000:]
    shown = [line for line in r.stderr.splitlines() if not line.startswith(("I", "E"))]
    assert len(shown) == 1 and shown[0].startswith("error: "), r.stderr[-3000:]
    assert "cannot read checkpoint" in shown[0] and str(workdir / "best" / "28") in shown[0]
    assert "Traceback" not in r.stderr and not (tmp_path / "new").exists()


# What a reader of parameters (retrieve, the rescore job, the warm start) says of a damaged
# best/28: the screen the trainer runs comes first, then the read and the finiteness check.
PARAMETER_READS = {
    "garbage _CHECKPOINT_METADATA": "is unusable (its _CHECKPOINT_METADATA is not a JSON object)",
    "missing default/": "is unusable (it has no default/ folder",
    "emptied step folder": "is unusable (it has no default/ folder",
    "missing default/manifest.ocdbt": "cannot read checkpoint",
    "non-finite state": "holds non-finite parameters",
}


@pytest.mark.parametrize("kind", list(PARAMETER_READS))
def test_parameter_reads_screen_the_checkpoint_first(reference, tmp_path, kind):
    workdir = _copy(reference, tmp_path)
    DAMAGE[kind](workdir / "best" / "28")
    with pytest.raises(InputError, match="pick another --checkpoint") as e:
        layout.restore_params(layout.find_checkpoint(workdir, "best"))
    assert f"checkpoint {workdir / 'best' / '28'}" in str(e.value)
    assert PARAMETER_READS[kind] in str(e.value)
    assert layout.restore_params(layout.find_checkpoint(workdir, "latest"))  # 28 is intact

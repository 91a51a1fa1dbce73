"""Faults around checkpoints, end to end (the main command in subprocesses, real orbax
checkpoints): every kind of damage to the newest checkpoint falls back to the next older
one, or to scratch, with one warning and ends with the uninterrupted run's metrics; a run
whose state turns non-finite leaves only finite checkpoints, and a rerun with a saner
optimiser finishes from the last; vanished gradients draw a warning.

The reference is one finished runlocal run (28 steps: checkpoints 25 and 28, best 28);
each case damages a copy. Resumes are exact on CPU, so a rerun that falls back to 25
retrains steps 26-28 into the same final metrics.
"""

import re
import shutil
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
import pytest
from train_runs import final, run_main, train_losses

from jaxsvr.checkpoint import all_finite

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


def test_checkpoint_of_another_config_is_one_line_exit_2(reference, tmp_path):
    workdir = _copy(reference, tmp_path)
    before = {name: (workdir / name).read_bytes() for name in ("config.json", "vocab.json")}
    r = run_main(workdir, "--config.model.embed_dim=64")
    assert r.returncode == 2, r.stderr[-3000:]
    assert before == {name: (workdir / name).read_bytes() for name in before}  # as it was
    (line,) = [line for line in r.stderr.splitlines() if line.startswith("error: ")]
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
    tree = {"w": jnp.ones((2, 3)), "count": jnp.array(3, jnp.int32), "none": None}
    assert bool(all_finite(tree))
    for bad in (np.nan, np.inf, -np.inf):
        assert not bool(all_finite({**tree, "b": jnp.array([0.0, bad])}))
    assert bool(all_finite({}))


def test_abandoned_reads_into_a_closed_loop_are_dropped_and_nothing_else(monkeypatch):
    """After a failed read, tensorstore threads may post the reads orbax abandoned to its
    closed event loop; the RuntimeError they get there is printed through sys.excepthook
    with only asyncio's frames. Exactly that is dropped."""
    import asyncio
    import logging
    import sys

    from jaxsvr import checkpoint_noise

    printed = []
    monkeypatch.setattr(sys, "excepthook", lambda kind, error, tb: printed.append(error))
    monkeypatch.setattr(sys, "unraisablehook", lambda unraisable: None)
    monkeypatch.setattr(logging.getLogger("asyncio"), "filters", [])
    checkpoint_noise.quiet_abandoned_reads()

    loop = asyncio.new_event_loop()
    loop.close()
    with pytest.raises(RuntimeError, match="Event loop is closed") as info:
        loop.call_soon_threadsafe(print)
    error = info.value
    from_c = error.__traceback__  # asyncio's frames only, as from tensorstore's thread
    while from_c.tb_frame.f_code.co_name != "call_soon_threadsafe":
        from_c = from_c.tb_next
    sys.excepthook(RuntimeError, error, from_c)
    assert printed == []
    sys.excepthook(RuntimeError, error, error.__traceback__)  # raised in our code: shown
    other = ValueError("Event loop is closed")
    sys.excepthook(ValueError, other, from_c)
    assert printed == [error, other]


@pytest.mark.parametrize("wording", ["Future", "Task", "_GatheringFuture"])
def test_abandoned_read_reports_from_asyncio_are_dropped_and_nothing_else(monkeypatch, wording):
    """A read orbax stopped waiting for reaches asyncio's default handler when it is
    collected, as "<class> exception was never retrieved"; only those are dropped."""
    import logging

    from jaxsvr import checkpoint_noise

    logger = logging.getLogger("asyncio")
    monkeypatch.setattr(logger, "filters", [])
    checkpoint_noise.quiet_abandoned_reads()
    if not logger.filters:  # hooks already installed in this process: add the filter alone
        logger.addFilter(checkpoint_noise._AbandonedReadFilter())
    kept = []

    class Keep(logging.Handler):
        def emit(self, record):
            kept.append(record.getMessage())

    handler = Keep()
    logger.addHandler(handler)
    try:
        named = (
            f"{wording} exception was never retrieved\nfuture: <Task finished coro=<async_"
            "deserialize() defined at .../orbax/checkpoint/_src/serialization.py:394> "
            "exception=Exception('Error reading ...')>"
        )
        unnamed = f"{wording} exception was never retrieved\nfuture: <{wording} finished>"
        logger.error(named)  # the message names orbax's coroutine
        try:  # the message does not, the exception's traceback does
            exec(compile("raise ValueError('Error reading')", "/x/orbax/checkpoint/s.py", "exec"))
        except ValueError as e:
            logger.error(unnamed, exc_info=e)
        logger.error(unnamed)  # neither: another library's, shown
        logger.error("Unclosed client session")
    finally:
        logger.removeHandler(handler)
    assert kept == [unnamed, "Unclosed client session"]

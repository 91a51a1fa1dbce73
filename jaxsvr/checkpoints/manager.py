"""orbax checkpoints in the workdir: the latest few for resuming, the best by a metric.

- `WORKDIR/checkpoints/<step>`: the train state when the trainer saves (every
  `config.checkpoint.every_steps` steps and at the end), keeping the `keep` most recent
  (the folders' layout: `jaxsvr.checkpoints.layout`). Rerunning the same command restores
  the newest usable one (restore order: resume from the workdir -> scratch); batch order
  and randomness are pure functions of (seed, step), so a resumed run continues exactly as
  the uninterrupted run.
- `WORKDIR/best/<step>`: the state at the evaluation with the best `metric` (one kept).
Saves are asynchronous; orbax writes each into a temporary folder and renames it when
complete, so a process killed mid-save leaves the previous checkpoint intact (unfinished
temporaries are removed on the next start). Every process joins every save. The trainer
saves only states whose every array is finite (`all_finite`, computed by the train step),
so a run that diverges leaves its last finite state as the newest checkpoint.

Damaged checkpoints. A committed checkpoint can still be damaged later: a disk or a copy
that truncates or garbles files, a folder emptied by hand, or a non-finite state written
by an older jaxsvr. So at the start of a run every step folder of `checkpoints/` and
`best/` is screened (orbax reads their `_CHECKPOINT_METADATA` and best's metrics as soon as
a manager starts, and a garbled one would stop it), then the best checkpoint and the
`checkpoints/` newest first are restored until one restores with every array finite. A
checkpoint that fails is moved aside to `WORKDIR/unusable/<folder>-<step>-<UTC time>`
with one warning naming it and the reason, and the next older one is tried; when none is
left, the run says so and starts from scratch, which ends as the uninterrupted run would.
Moving rather than deleting keeps the files for inspection (an I/O error that was only
transient costs retraining some steps, never data); taking them out of the managed folders
lets orbax save that step again and keeps its `keep` and best bookkeeping to usable
checkpoints, so the next rerun does not warn again. Delete `WORKDIR/unusable/` once
inspected. A checkpoint whose arrays (names, shapes, dtypes) differ from the state this
config builds is not damaged but another config's: that is an `InputError` naming the first
difference, never a fallback.
"""

from __future__ import annotations

import logging
import math
import time
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
from jax.experimental import multihost_utils

from jaxsvr.checkpoints import layout
from jaxsvr.checkpoints.reads import reads_that_finish
from jaxsvr.errors import InputError
from jaxsvr.files import locations

UNUSABLE = "unusable"  # WORKDIR/unusable/: checkpoints moved aside


class _Unusable(Exception):
    """A checkpoint that cannot be restored; the message says why in one line."""


def all_finite(tree: Any) -> jax.Array:
    """A device bool: every floating-point array of `tree` is finite (traceable).

    Computed as products with zeros: each array, as a [rows, last axis] matrix, times a
    zero vector, summed over everything. 0 · x is ±0 for every finite x and NaN for an
    infinite or NaN one, and NaN survives the sums, so the total is finite exactly when
    every element is. The train step runs this on the new parameters and optimiser state
    every step; XLA's CPU back-end runs such a product as one read of the array (float32),
    where `all(isfinite(x))` (the same flag) wrote a boolean copy and reduced it in a
    second pass: the SMS heads' step took 2–3 ms less (docs/benchmarks.md). The products
    run at full precision whatever `config.matmul_precision` says, so no finite value is
    rounded to infinity.
    """
    total = jnp.zeros((), jnp.float32)
    for x in jax.tree.leaves(tree):
        if not jnp.issubdtype(x.dtype, jnp.inexact):
            continue
        cols = x.shape[-1] if x.ndim else 1
        matrix = jnp.reshape(x, (math.prod(x.shape[:-1]), cols))
        product = jnp.matmul(  # full precision: TF32 / bfloat16 could round a finite max to inf
            matrix, jnp.zeros((cols,), x.dtype), precision=jax.lax.Precision.HIGHEST
        )
        total = total + jnp.sum(product).real.astype(jnp.float32)
    return jnp.isfinite(total)


_all_finite = jax.jit(all_finite)


class Checkpointer:
    """Args:
    workdir: the run folder.
    keep: how many recent checkpoints to keep (>= 1, `config.checkpoint.keep`).
    metric: the evaluation metric that picks `best/` ("" disables it).
    mode: "max" or "min" for `metric`.
    """

    def __init__(self, workdir: str | Path, *, keep: int, metric: str, mode: str = "max"):
        self.workdir = locations.for_orbax(locations.locate(workdir))
        self.metric = metric
        self.moved = 0  # checkpoints/ folders moved aside in this run
        self._barriers = 0
        self._screen("checkpoints", metric=None)
        self.latest = _Manager(
            self.workdir / "checkpoints",
            options=ocp.CheckpointManagerOptions(
                max_to_keep=keep,
                create=True,
                cleanup_tmp_directories=True,
                multiprocessing_options=_barriers("checkpoints"),
            ),
            item_handlers=ocp.StandardCheckpointHandler(),
        )
        self.best = None
        self.mode = mode
        # the best state so far: its step and the metrics saved with it (best/'s metrics
        # file: `metric`, and what `save_best` was given as `extra`)
        self.best_step: int | None = None
        self.best_record: dict[str, float] = {}
        if metric:
            self._screen("best", metric=metric)
            self.best = _Manager(
                self.workdir / "best",
                options=ocp.CheckpointManagerOptions(
                    max_to_keep=1,
                    best_fn=lambda m: m[metric],
                    best_mode=mode,
                    create=True,
                    cleanup_tmp_directories=True,
                    multiprocessing_options=_barriers("best"),
                ),
                item_handlers=ocp.StandardCheckpointHandler(),
            )

    def restore(self, state: Any) -> Any | None:
        """The newest usable checkpoint of `checkpoints/` restored into `state`'s structure,
        shapes and shardings, or None when there is none (the run starts from scratch).

        Unusable checkpoints, and an unusable best checkpoint (checked here too), are moved
        aside with a warning (see the module docstring).

        Raises:
          InputError: a checkpoint holds another config's state.
        """
        abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, state)
        if self.best is not None:
            for step in self.best.all_steps():
                self._restore(self.best, step, abstract)
            self._read_best()
        for step in sorted(self.latest.all_steps(), reverse=True):
            restored = self._restore(self.latest, step, abstract)
            if restored is not None:
                logging.info("checkpoint: resumed from %s at step %d", self.latest.directory, step)
                return restored
        if self.moved:
            logging.warning(
                "checkpoint: no usable checkpoint is left in %s (%d moved aside to %s): "
                "training starts from scratch",
                self.latest.directory,
                self.moved,
                self.workdir / UNUSABLE,
            )
        else:
            logging.info("checkpoint: none in %s: training from scratch", self.latest.directory)
        return None

    def save(self, step: int, state: Any) -> None:
        """Saves `state`, which the caller has checked is finite."""
        if self.latest.latest_step() != step:
            self.latest.save(step, args=ocp.args.StandardSave(state), force=True)

    def save_best(
        self, step: int, state: Any, metrics: dict[str, float], extra: dict | None = None
    ) -> None:
        """Saves `state` as best/ when its `metrics[metric]` beats the best so far (ties
        keep the earlier state), with `extra` numbers in its metrics file."""
        if self.best is None or metrics.get(self.metric) is None:
            return
        if step in self.best.all_steps():  # re-evaluated after a resume: already saved
            return
        value = float(metrics[self.metric])
        if self.best_record:
            previous = self.best_record[self.metric]
            if not (value > previous if self.mode == "max" else value < previous):
                return
        record = {self.metric: value}
        record.update({k: float(v) for k, v in (extra or {}).items() if isinstance(v, int | float)})
        self.best.save(step, args=ocp.args.StandardSave(state), metrics=record, force=True)
        self.best_step, self.best_record = step, record

    def _read_best(self) -> None:
        """`best_step` and `best_record` from the best/ folder left after screening."""
        steps = self.best.all_steps()
        if not steps:
            return
        step = max(steps)
        record = layout.best_metrics(self.workdir / "best" / str(step))
        try:
            record = {k: float(v) for k, v in record.items()}
        except (ValueError, TypeError):  # screened already; unreadable now: none
            record = {}
        self.best_step, self.best_record = (step, record) if record else (None, {})

    def close(self) -> None:
        for manager in (self.latest, self.best):
            if manager is not None:
                manager.wait_until_finished()
                manager.close()

    def _screen(self, folder: str, metric: str | None) -> None:
        """Moves aside the step folders of `folder` whose files an orbax manager reads when
        it starts (or that hold no state at all) and that are damaged."""
        root = self.workdir / folder
        for step in layout.steps(root, folders_only=False):
            why = layout.damage(root / str(step), metric)
            if why is not None:
                self._move_aside(root, step, why)
        self._sync()  # every process starts its manager after the moves

    def _restore(self, manager: ocp.CheckpointManager, step: int, abstract: Any) -> Any | None:
        """`step` of `manager` restored into `abstract`, or None after moving it aside."""
        path = manager.directory / str(step)
        why = None
        try:
            restored = _read(manager, step, abstract, path)
        except _Unusable as e:
            why, restored = str(e), None
        if not _everywhere(why is None):
            self._move_aside(manager.directory, step, why or "unreadable on another process")
            self._sync()
            manager.reload()  # drop the step from orbax's bookkeeping
            return None
        return restored

    def _move_aside(self, root: Path, step: int, why: str) -> None:
        if root.name == "checkpoints":
            self.moved += 1
        if jax.process_index() != 0:
            return
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        dest = self.workdir / UNUSABLE / f"{root.name}-{step}-{stamp}"
        dest.parent.mkdir(exist_ok=True)
        n = 1
        while dest.exists():  # two in the same second
            dest, n = dest.with_name(f"{root.name}-{step}-{stamp}-{n}"), n + 1
        (root / str(step)).rename(dest)
        logging.warning(
            "checkpoint: %s is unusable (%s); moved it to %s", root / str(step), why, dest
        )

    def _sync(self) -> None:
        if jax.process_count() > 1:
            self._barriers += 1
            multihost_utils.sync_global_devices(f"jaxsvr-checkpoint-{self._barriers}")


class _Manager(ocp.CheckpointManager):
    """orbax's manager without its own asks of JAX's preemption service. jaxsvr's training
    loop asks it once after every step (`jaxsvr.train.preemption`), and the service agrees
    on the step to stop at from the step each process asked last; orbax also asks at each
    save and (on process 0, from a background thread) when an asynchronous save
    completes, with that save's step, by then behind the loop's: an agreed step the loop
    has passed would never be reached. orbax uses the answer only for its logs and
    statistics when saves are forced, as jaxsvr's are."""

    def reached_preemption(self, step: int) -> bool:
        return False


def _barriers(name: str) -> ocp.options.MultiprocessingOptions:
    """Barrier names of their own for each manager: in a multi-process run the two
    managers' saves finish on background threads at the same time, and orbax's barriers
    of the same name would collide ("Barrier ... is already ongoing")."""
    return ocp.options.MultiprocessingOptions(barrier_sync_key_prefix=f"jaxsvr-{name}")


def _read(manager: ocp.CheckpointManager, step: int, abstract: Any, path: Path) -> Any:
    """Restores `step`; raises _Unusable when it cannot be read or is not finite, and
    InputError when it holds another state than `abstract`."""
    try:
        with reads_that_finish():  # a failed read leaves no abandoned reads to report
            saved = manager.item_metadata(step)
        saved = {m.name: (tuple(m.shape), np.dtype(m.dtype)) for m in jax.tree.leaves(saved)}
    except Exception as e:  # orbax and tensorstore raise many kinds for unreadable files
        raise _Unusable(f"its array metadata cannot be read: {_reason(e)}") from e
    _check_layout(saved, abstract, path)
    try:
        with reads_that_finish():
            restored = manager.restore(step, args=ocp.args.StandardRestore(abstract))
    except Exception as e:  # as above
        raise _Unusable(f"its arrays cannot be read: {_reason(e)}") from e
    if not bool(jax.device_get(_all_finite(restored))):
        raise _Unusable("it holds non-finite parameters or optimizer state (a diverged run's)")
    return restored


def _check_layout(saved: dict[str, tuple], abstract: Any, path: Path) -> None:
    """Raises InputError when the arrays saved at `path` (name -> (shape, dtype)) are not
    those of `abstract`."""
    names = jax.tree.leaves(ocp.tree.get_param_names(abstract, include_empty_nodes=False))
    leaves = jax.tree.leaves(abstract)
    want = {n: (tuple(x.shape), np.dtype(x.dtype)) for n, x in zip(names, leaves, strict=True)}
    diffs = [f"{n} is not in this config's state" for n in saved if n not in want]
    diffs += [f"{n} is missing" for n in want if n not in saved]
    diffs += [
        f"{n} is {saved[n][1]}{list(saved[n][0])} there, {want[n][1]}{list(want[n][0])} here"
        for n in want
        if n in saved and saved[n] != want[n]
    ]
    if diffs:
        raise InputError(
            f"checkpoint {path} holds another model or optimizer state than this config builds "
            f"({diffs[0]}; {len(diffs)} difference(s)): rerun with the config that wrote it, or "
            "pick a new --workdir"
        )


def _reason(e: BaseException) -> str:
    """The first line of the innermost cause of `e`; re-raises `e` when that is memory
    exhaustion (a good checkpoint must not be moved aside for it)."""
    root = e
    while True:
        if isinstance(root, MemoryError) or "RESOURCE_EXHAUSTED" in str(root):
            raise e
        nxt = root.__cause__ or (None if root.__suppress_context__ else root.__context__)
        if nxt is None:
            break
        root = nxt
    lines = str(root).strip().splitlines()
    text = lines[0] if lines else ""
    text = text if len(text) <= 200 else text[:197] + "..."
    return f"{type(root).__name__}: {text}" if text else type(root).__name__


def _everywhere(ok: bool) -> bool:
    """`ok` on every process: all of them then move on to the same checkpoint."""
    if jax.process_count() == 1:
        return ok
    return bool(np.all(multihost_utils.process_allgather(np.array(ok))))

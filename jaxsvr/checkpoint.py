"""orbax checkpoints in the workdir: the latest few for resuming, the best by a metric.

- `WORKDIR/checkpoints/<step>`: the train state every `every_steps` steps and at the end,
  keeping the `keep` most recent. Rerunning the same command restores the latest one
  (restore order: resume from the workdir -> scratch); batch order and randomness are pure
  functions of (seed, step), so a resumed run continues exactly as the uninterrupted run.
- `WORKDIR/best/<step>`: the state at the evaluation with the best `metric` (one kept).
Saves are asynchronous; orbax writes each into a temporary folder and renames it when
complete, so a process killed mid-save leaves the previous checkpoint intact (unfinished
temporaries are removed on the next start). Every process joins every save.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import jax
import orbax.checkpoint as ocp

from jaxsvr.errors import InputError


class Checkpointer:
    """Args:
    workdir: the run folder.
    every_steps: save interval for `checkpoints/`.
    keep: how many recent checkpoints to keep.
    metric: the evaluation metric that picks `best/` ("" disables it).
    mode: "max" or "min" for `metric`.
    """

    def __init__(
        self, workdir: str | Path, *, every_steps: int, keep: int, metric: str, mode: str = "max"
    ):
        if every_steps < 1 or keep < 1:
            raise InputError(
                "config.checkpoint.every_steps and config.checkpoint.keep must be >= 1, got "
                f"{every_steps} and {keep}"
            )
        workdir = Path(workdir).absolute()
        self.every_steps = every_steps
        self.metric = metric
        self.latest = ocp.CheckpointManager(
            workdir / "checkpoints",
            options=ocp.CheckpointManagerOptions(
                max_to_keep=keep, create=True, cleanup_tmp_directories=True
            ),
        )
        self.best = None
        if metric:
            self.best = ocp.CheckpointManager(
                workdir / "best",
                options=ocp.CheckpointManagerOptions(
                    max_to_keep=1,
                    best_fn=lambda m: m[metric],
                    best_mode=mode,
                    create=True,
                    cleanup_tmp_directories=True,
                ),
            )

    def latest_step(self) -> int | None:
        return self.latest.latest_step()

    def restore(self, state: Any) -> Any:
        """The latest checkpoint restored into `state`'s structure, shapes and shardings."""
        step = self.latest.latest_step()
        abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, state)
        restored = self.latest.restore(step, args=ocp.args.StandardRestore(abstract))
        logging.info("checkpoint: resumed from %s at step %d", self.latest.directory, step)
        return restored

    def should_save(self, step: int) -> bool:
        return step % self.every_steps == 0

    def save(self, step: int, state: Any) -> None:
        if self.latest.latest_step() != step:
            self.latest.save(step, args=ocp.args.StandardSave(state), force=True)

    def save_best(self, step: int, state: Any, metrics: dict[str, float]) -> None:
        if self.best is None or metrics.get(self.metric) is None:
            return
        if step in self.best.all_steps():  # re-evaluated after a resume: already saved
            return
        self.best.save(
            step,
            args=ocp.args.StandardSave(state),
            metrics={self.metric: float(metrics[self.metric])},
            force=True,
        )

    def close(self) -> None:
        for manager in (self.latest, self.best):
            if manager is not None:
                manager.wait_until_finished()
                manager.close()

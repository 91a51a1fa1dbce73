"""Stopping training on SIGTERM, with a checkpoint of the step it reached.

Schedulers (Slurm, Kubernetes, preemptible cloud VMs, TPU maintenance) and
`launch/local.py`'s graceful stop send SIGTERM and kill a while later. The trainer asks
`Stop.requested(step)` after every step but the last (a SIGTERM during the last step,
its evaluation included, lets the run finish); on yes it saves that step's state
(the checkpoint a periodic save writes) and raises `Preempted`, which `python -m
jaxsvr.main` turns into one line naming the step and exit code 143 (128 + SIGTERM, the
code of a process SIGTERM ends). Rerunning the command resumes from that checkpoint and
goes on as the uninterrupted run (batches and randomness are functions of the step).
The metrics of the steps since the last log line, which the stop had to check before
saving, are kept in `WORKDIR/preempted_window.json` (`save_window`), and the resumed run
takes them back (`load_window`), so its next log line averages the same steps as the
uninterrupted run's: the same losses bit for bit.

- One process: a Python SIGTERM handler records the signal; it is installed while
  training runs (from the main thread only: elsewhere SIGTERM keeps its handler) and
  the previous handler is restored after.
- Several processes (`jax.distributed`): JAX's preemption service catches SIGTERM on any
  process and agrees with all of them on one step to stop at (the largest step any has
  reached, plus one: `multihost_utils.reached_preemption_sync_point`, which every
  process calls at every step with the run's own step count), so all save the same step
  and exit. With the service off (`jax_enable_preemption_service=False`) SIGTERM is
  left to JAX's default.
"""

from __future__ import annotations

import json
import logging
import signal
import threading
from pathlib import Path

import jax
import numpy as np
from jax.experimental import multihost_utils

from jaxsvr.runtime.workdir import write_text

EXIT_PREEMPTED = 128 + signal.SIGTERM  # 143
WINDOW = "preempted_window.json"


class Preempted(Exception):
    """Training stopped on SIGTERM after saving `step`."""

    def __init__(self, step: int):
        super().__init__(
            f"stopped on SIGTERM after step {step}, saved as checkpoint {step}: rerun the "
            "same command to resume"
        )
        self.step = step


class Stop:
    """Whether training should stop at a step because SIGTERM arrived (module docstring):
    `install()` before the training loop, `restore()` after it and its last save (in a
    `finally`).

    Args:
      start_step: the step training starts after (the restored checkpoint's, 0 when
        fresh; the same in every process). JAX's service counts steps from 0 in each
        process and, for a SIGTERM that comes before the first step, agrees on step 1:
        it is given the steps of this run (step - start_step), so a resumed run stops at
        its first step too.
    """

    def __init__(self, start_step: int = 0):
        self.start_step = start_step
        self.signalled = False
        self._installed = False
        self._previous = None
        # several processes: JAX's service where initialize created it (True by default)
        self._synced = jax.distributed.is_initialized()

    def install(self) -> Stop:
        """Installs the one-process SIGTERM handler (from the main thread only)."""
        if not self._synced and threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGTERM, self._record)
            self._installed = True
        return self

    def restore(self) -> None:
        """Puts back the SIGTERM handler `install` replaced."""
        if self._installed:
            # None: a handler not installed from Python; the default is the nearest
            signal.signal(signal.SIGTERM, self._previous or signal.SIG_DFL)
            self._installed = False

    def _record(self, signum, frame) -> None:
        self.signalled = True  # nothing else here: a handler may interrupt a log write

    def requested(self, step: int) -> bool:
        """Whether to save `step` and stop; called after every step but the last (by every
        process, with the same steps, in a run of several)."""
        if self._synced:
            try:
                stop = multihost_utils.reached_preemption_sync_point(step - self.start_step)
            except RuntimeError:  # the service is off (jax_enable_preemption_service)
                self._synced = None
                stop = False
        else:
            stop = self.signalled
        if stop:
            logging.warning("SIGTERM: saving step %d, then stopping", step)
        return stop


def save_window(workdir: Path, step: int, window: list[tuple[int, dict]]) -> None:
    """Writes the checked step metrics since the last log line of a run stopped at `step`
    (their values and dtypes exactly)."""
    steps = [
        [s, {k: [np.asarray(v).item(), np.asarray(v).dtype.name] for k, v in m.items()}]
        for s, m in window
    ]
    write_text(workdir / WINDOW, json.dumps({"step": step, "steps": steps}) + "\n")


def load_window(workdir: Path, step: int) -> list[tuple[int, dict]]:
    """The step metrics `save_window` kept for a run stopped at `step`; [] when the file is
    absent, unreadable, not finite or from another stop (a later checkpoint, or one never
    restored)."""
    try:
        saved = json.loads((workdir / WINDOW).read_text())
        if saved["step"] != step:
            return []
        window = [
            (int(s), {k: np.asarray(v, dtype=np.dtype(t))[()] for k, (v, t) in m.items()})
            for s, m in saved["steps"]
        ]
    except (OSError, ValueError, KeyError, TypeError):
        return []
    finite = all(np.isfinite(v) for _, m in window for v in m.values())
    return window if finite else []


def discard_window(workdir: Path) -> None:
    """Removes a kept window (a run that starts afresh in the workdir)."""
    try:
        (workdir / WINDOW).unlink()
    except OSError:
        pass

"""Host-side watchers of the training loop (`jaxsvr.train.loop`): steps/s, ETA and the share of
time spent waiting for batches (`Timer`), and the warning for gradients that vanished
(`VanishedGradients`). They see only scalars already pulled to the host at log steps.
"""

from __future__ import annotations

import logging
import time

ZERO_GRAD_STEPS = 20  # consecutive steps of zero gradient (and non-zero loss) that warn


class VanishedGradients:
    """Warns once when the gradient has been exactly zero for `ZERO_GRAD_STEPS` steps in a
    row while the loss was not: nothing is learnt, yet the run would end without a word."""

    def __init__(self):
        self.run = 0

    def see(self, step: int, loss: float, grad_norm: float) -> None:
        self.run = self.run + 1 if grad_norm == 0 and loss != 0 else 0
        if self.run == ZERO_GRAD_STEPS:  # once per stretch
            logging.warning(
                "the gradient vanished: zero for the last %d steps up to step %d while the loss "
                "was %.4g; the model no longer learns (a learning rate so large that every unit "
                "saturated, or a dead model): lower config.optimizer.lr",
                ZERO_GRAD_STEPS,
                step,
                loss,
            )


class Timer:
    """Steps/s, ETA and the share of time the training loop waited for batches."""

    def __init__(self, start_step: int, total_steps: int):
        self.start = self.last = time.perf_counter()
        self.first_step = self.last_step = start_step
        self.total = total_steps
        self.waited = 0.0
        self.last_waited = 0.0

    def rates(self, step: int) -> dict[str, float]:
        now = time.perf_counter()
        span = max(now - self.last, 1e-9)
        out = {
            "steps_per_sec": (step - self.last_step) / span,
            "host_wait": (self.waited - self.last_waited) / span,
        }
        self.last, self.last_step, self.last_waited = now, step, self.waited
        return out

    def log(self, step: int, steps_per_epoch: int, scalars: dict) -> None:
        rate = scalars["steps_per_sec"]
        eta = (self.total - step) / max(rate, 1e-9)
        logging.info(
            "step %d/%d (epoch %.1f): loss %.4f | %.1f steps/s | host wait %.1f%% | ETA %s",
            step,
            self.total,
            step / steps_per_epoch,
            scalars["loss"],
            rate,
            100 * scalars["host_wait"],
            time.strftime("%H:%M:%S", time.gmtime(eta)),
        )

    def summary(self) -> dict[str, float]:
        span = time.perf_counter() - self.start
        steps = self.last_step - self.first_step
        return {
            "train_seconds": span,
            "train_steps": steps,
            "steps_per_sec": steps / span if steps else 0.0,
            "host_wait": self.waited / span if steps else 0.0,
        }

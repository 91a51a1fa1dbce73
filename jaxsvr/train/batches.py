"""The host side of training input: batches per step, gathered rows, prefetching.

`BatchSource(step)` builds this process's share of batch `step` from the objective (a
pure function of (seed, epoch, step)); with `gather="host"` it also gathers the model
inputs (`jaxsvr.inputs.model_inputs`, through context windows where the model has
them). `Prefetch` runs a source on a background thread and puts its batches on the device
mesh ahead of the train step.
"""

from __future__ import annotations

import queue
import threading
import time

import numpy as np

from jaxsvr.inputs.model_inputs import ModelInputs
from jaxsvr.runtime import parallel

GATHERS = ("device", "host")  # config.train.gather: where the inputs of a batch are gathered


class BatchSource:
    """This process's share of batch `step` (`process` = (index, count) picks another
    process's share, for tests). The shares of all processes, in process order, are the
    batch one process builds; each process gathers host inputs for its share only.

    gather="device": the objective's arrays (row indices, margins or relevance); the step
    gathers features and text inputs from tables that live on the devices (no per-step
    host copies). gather="host": the inputs themselves are gathered here too
    (`ModelInputs.gather_host`: for feature stores too large to keep on the devices).
    """

    def __init__(
        self, objective, inputs: ModelInputs, batch_size, steps_per_epoch, gather, process=None
    ):
        self.objective, self.inputs = objective, inputs
        self.batch_size, self.steps_per_epoch = batch_size, steps_per_epoch
        self.gather = gather
        index, count = process if process is not None else (None, None)
        self.cut = parallel.process_slice(batch_size, index, count)

    def keys(self) -> tuple[str, ...]:
        """The keys of every batch."""
        keys = self.objective.batch_keys
        return keys if self.gather == "device" else (*keys, *self.objective.gathers)

    def __call__(self, step: int) -> dict[str, np.ndarray]:
        epoch, index = divmod(step - 1, self.steps_per_epoch)
        batch = self.objective.host_batch(epoch, index, self.batch_size, self.cut)
        if self.gather == "host":
            batch.update(self.inputs.gather_host(self.objective.gathers, batch))
        return batch


class Prefetch:
    """Builds the next batches on a background thread and puts them on the devices."""

    def __init__(self, source, mesh, start_step: int, total_steps: int, depth: int = 2):
        self.queue: queue.Queue = queue.Queue(maxsize=max(depth, 1))
        self.stop = threading.Event()

        def work():
            try:
                for step in range(start_step + 1, total_steps + 1):
                    item = parallel.global_batch(source(step), mesh)
                    while not self.stop.is_set():
                        try:
                            self.queue.put(item, timeout=0.1)
                            break
                        except queue.Full:
                            continue
                    if self.stop.is_set():
                        return
            except BaseException as e:  # surfaced in the training thread
                self.queue.put(e)

        self.thread = threading.Thread(target=work, name="batches", daemon=True)
        self.thread.start()

    def next(self, timer) -> dict:
        """The next batch; the time spent waiting for it is added to `timer.waited`."""
        start = time.perf_counter()
        item = self.queue.get()
        timer.waited += time.perf_counter() - start
        if isinstance(item, BaseException):
            raise item
        return item

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=10)

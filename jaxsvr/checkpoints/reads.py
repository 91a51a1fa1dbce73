"""Checkpoint reads that leave nothing behind when one of their arrays cannot be read.

orbax runs each restore in an event loop of its own (`asyncio.new_event_loop()`), gathers
the reads of every array there, and closes the loop as soon as the first read fails. The
other reads are still in flight on tensorstore's threads: when they finish they post into
the closed loop, and their tasks are collected with exceptions nobody retrieved. Both
print tracebacks on stderr (tens to hundreds of lines, a different number each run) after
jaxsvr has already said, in one line, that the checkpoint is unusable.

`reads_that_finish()` is the context every orbax read in jaxsvr runs under. While it is
active, the loops orbax creates close only after every task created in them has finished,
and the exceptions of those nobody awaited any more are retrieved, so nothing is left to
report: the failed read's error is the only thing anyone sees. It fixes the cause rather
than filtering what is printed, so no real error of another library is ever hidden.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import warnings
from collections.abc import Iterator

# A pending read of a local or cloud file finishes or fails within this many seconds;
# the bound only keeps a stuck read from hanging the process for ever.
DRAIN_SECONDS = 300.0


class _DrainingLoop(asyncio.SelectorEventLoop):
    """An event loop whose `close()` first runs every task created in it to its end and
    retrieves the exceptions nobody awaited."""

    def __init__(self) -> None:
        super().__init__()
        self._tasks: list[asyncio.Task] = []
        self.set_task_factory(self._new_task)

    def _new_task(self, loop, coro, **kwargs) -> asyncio.Task:
        task = asyncio.Task(coro, loop=loop, **kwargs)
        self._tasks.append(task)
        return task

    def close(self) -> None:
        if not self.is_closed() and not self.is_running():
            while pending := [task for task in self._tasks if not task.done()]:
                done, _ = self.run_until_complete(asyncio.wait(pending, timeout=DRAIN_SECONDS))
                if not done:
                    break  # a stuck read: closing reports it, as it would have anyway
            # retrieved, so never reported as "Task exception was never retrieved": this
            # includes tasks that failed after the first failure, before the loop stopped
            for task in self._tasks:
                if task.done() and not task.cancelled():
                    task.exception()
            self._tasks.clear()
        super().close()


class _DrainingPolicy(asyncio.DefaultEventLoopPolicy):
    def new_event_loop(self) -> asyncio.AbstractEventLoop:
        return _DrainingLoop()


_lock = threading.RLock()  # one policy swap at a time (restores in threads, nested ones)


@contextlib.contextmanager
def reads_that_finish() -> Iterator[None]:
    """Within this context, event loops created in the process (orbax's, for each read)
    finish their pending tasks before they close (module docstring)."""
    with _lock:
        previous = _set_policy(_DrainingPolicy())
        try:
            yield
        finally:
            _set_policy(previous)


def _set_policy(policy: asyncio.AbstractEventLoopPolicy) -> asyncio.AbstractEventLoopPolicy:
    """Makes `policy` asyncio's; returns the one it replaces."""
    with warnings.catch_warnings():
        # Python 3.14 deprecates event loop policies; orbax offers no other way to choose
        # the loop it reads in.
        warnings.simplefilter("ignore", DeprecationWarning)
        previous = asyncio.get_event_loop_policy()
        asyncio.set_event_loop_policy(policy)
    return previous

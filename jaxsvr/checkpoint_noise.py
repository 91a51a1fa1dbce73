"""Quiets the reads orbax abandons when one read of a damaged checkpoint fails.

`jaxsvr.checkpoint` restores checkpoints that may be damaged; when one array read fails,
orbax stops waiting for the others, which still finish on tensorstore threads and report
their errors into an event loop orbax has closed, or as never-retrieved futures, as tens
of tracebacks although the checkpoint has been moved aside and nothing is wrong any more.
`quiet_abandoned_reads()` installs hooks that drop exactly those reports.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import traceback
from typing import Any


def quiet_abandoned_reads() -> None:
    """Drops the noise of the reads orbax abandons when one read of a checkpoint fails.

    The others are still in flight on tensorstore threads; when they finish, into an event
    loop orbax has closed, or when their coroutines are finalised, their errors reach
    `sys.unraisablehook`, which prints tens of tracebacks although nothing is wrong any
    more. The hooks installed here (once per process, before the first checkpoint read, as
    those threads can report before the failed read returns) drop exactly those and pass
    every other exception on.
    """
    previous = sys.unraisablehook
    if getattr(previous, "jaxsvr_quiet", False):
        return

    def hook(unraisable: Any) -> None:
        error, obj = unraisable.exc_value, unraisable.object
        code = getattr(obj, "cr_code", None)  # a coroutine finalised with its exception
        if not (_closed_loop(error) or (code is not None and "orbax" in code.co_filename)):
            previous(unraisable)

    hook.jaxsvr_quiet = True
    sys.unraisablehook = hook
    # A tensorstore thread that posts a finished read to the closed loop gets the error
    # from asyncio's call_soon_threadsafe and prints it with PyErr_Print, which goes
    # through sys.excepthook: dropped when every frame of its traceback is asyncio's.
    previous_excepthook = sys.excepthook

    def excepthook(kind: type, error: BaseException, tb: Any) -> None:
        if not (_closed_loop(error) and tb is not None and _asyncio_only(tb)):
            previous_excepthook(kind, error, tb)

    sys.excepthook = excepthook
    # A read future that fails after orbax stopped waiting reaches asyncio's default
    # handler instead, as one "<class> exception was never retrieved" error with traceback.
    logging.getLogger("asyncio").addFilter(_AbandonedReadFilter())


def _closed_loop(error: BaseException) -> bool:
    return isinstance(error, RuntimeError) and str(error) == "Event loop is closed"


def _asyncio_only(tb: Any) -> bool:
    """Every frame of traceback `tb` is in the asyncio package (a call from C into it)."""
    folder = os.path.dirname(asyncio.__file__) + os.sep
    frames = traceback.extract_tb(tb)
    return bool(frames) and all(f.filename.startswith(folder) for f in frames)


class _AbandonedReadFilter(logging.Filter):
    """Drops asyncio's report of a failed checkpoint read nobody waits for any more."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        first = message.split("\n", 1)[0]
        # asyncio names the class: Future, Task (an array read), _GatheringFuture (its parts)
        never_retrieved = first.endswith(" exception was never retrieved")
        return not (never_retrieved and (_from_orbax(record.exc_info) or "orbax" in message))


def _from_orbax(exc_info: Any) -> bool:
    """The exception of a log record's `exc_info` was raised in orbax's code."""
    error = exc_info[1] if exc_info else None
    if not isinstance(error, BaseException) or error.__traceback__ is None:
        return False
    return any("orbax" in f.filename for f in traceback.extract_tb(error.__traceback__))

"""Training metrics to JSON lines and TensorBoard event files (tensorboardX, no TensorFlow).

`MetricWriter` appends one JSON object per call to `WORKDIR/metrics.jsonl` (easy to grep,
load with pandas, or diff between runs) and the same scalars to a TensorBoard event file
`WORKDIR/tensorboard/events.out.tfevents.<time>.<host>[.<n>]`, one event per call, written
by tensorboardX (its protobufs and TFRecord writer, no TensorFlow); only viewing the curves
needs tensorboard.

Only process 0 should write: other processes pass `enabled=False` and get a no-op writer.
A URL workdir (`gs://...`, `file://...`: `jaxsvr.files.locations`; an object store cannot
append) is served by the same files in a local staging folder, each copied whole to the
workdir at every `flush` (the trainer flushes every log step and evaluation) and removed
at `close`; a resumed run first copies the workdir's `metrics.jsonl` down.
A run that resumes from a checkpoint at step s passes `resume_step=s`: later JSON lines
(written after the checkpoint by the crashed run) are dropped, and the new event file opens
with a SessionLog START at step s + 1 that makes TensorBoard
discard the orphaned points. Lines that cannot be read (not UTF-8, not a JSON object with an
integer "step": a line torn by a crash, or damage) are dropped too, with one warning that
counts them. Metrics of steps up to s were written before that checkpoint, so the resumed
writer does not write them again: rerunning a finished run (which evaluates its final state
again) leaves `metrics.jsonl` as it was.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

import numpy as np
from tensorboardX.event_file_writer import EventsWriter
from tensorboardX.proto import event_pb2, summary_pb2

from jaxsvr.files import json_text, locations
from jaxsvr.runtime.workdir import write_bytes, write_text


def _to_python(value: object) -> int | float:
    """Turns a Python, NumPy or JAX scalar into a Python int or float for JSON."""
    item = np.asarray(value).item()
    if isinstance(item, bool | int):
        return int(item)
    return float(item)


class MetricWriter:
    """Writes scalar metrics of process 0 to `metrics.jsonl` and a TensorBoard event file.

    Args:
      workdir: Run directory; created if missing.
      enabled: False on processes other than 0: every method is a no-op, no file is touched.
      resume_step: Step of the checkpoint a resumed run restored. Lines of an existing
        `metrics.jsonl` with step > resume_step (or unreadable) are dropped, and the new
        event file starts with SessionLog START at resume_step + 1, so TensorBoard purges
        points with step > resume_step; writes for steps <= resume_step are skipped (the
        run that saved the checkpoint wrote them). When None (a fresh run), an existing
        `metrics.jsonl` is truncated; older event files are left alone (delete them or use
        a new workdir).
    """

    def __init__(
        self, workdir: str | os.PathLike, *, enabled: bool = True, resume_step: int | None = None
    ) -> None:
        self._enabled = enabled
        self._resume_step = resume_step
        if not enabled:
            return
        workdir = locations.locate(workdir)
        # The workdir itself, or (a URL) the staging folder whose files `flush` copies to it.
        self._remote = None if locations.local_file(workdir) else workdir
        local = Path(tempfile.mkdtemp(prefix="jaxsvr-metrics-")) if self._remote else workdir
        tb_dir = local / "tensorboard"
        tb_dir.mkdir(parents=True, exist_ok=True)
        if self._remote:
            (workdir / "tensorboard").mkdir(parents=True, exist_ok=True)
        # tensorboardX names the file by the second and opens it with "wb": each later
        # writer of the workdir (a resume) numbers its file, so none is overwritten.
        earlier = len(list((workdir / "tensorboard").glob("events.out.tfevents.*")))
        jsonl = local / "metrics.jsonl"
        if self._remote and resume_step is not None and (workdir / "metrics.jsonl").exists():
            jsonl.write_bytes((workdir / "metrics.jsonl").read_bytes())
        if resume_step is not None and jsonl.exists():
            _keep_until(jsonl, resume_step)
        mode = "a" if resume_step is not None else "w"
        self._jsonl = open(jsonl, mode, buffering=1, encoding="utf-8")
        # tensorboardX's synchronous writer (its SummaryWriter queues events on a thread,
        # and its flush() does not wait for them): each record reaches the file whole.
        self._events = EventsWriter(
            str(tb_dir / "events"), filename_suffix=f".{earlier}" if earlier else ""
        )
        if resume_step is not None:
            # TensorBoard drops every earlier point with step >= this event's step.
            start = event_pb2.SessionLog(status=event_pb2.SessionLog.START)
            self._events.write_event(
                event_pb2.Event(wall_time=time.time(), step=resume_step + 1, session_log=start)
            )
        self._staged = (jsonl, Path(self._events._file_name))
        self.flush()

    def write_scalars(self, step: int, scalars: Mapping[str, float]) -> None:
        """Appends one JSON line `{"step": step, **scalars}` and one TensorBoard event.

        Args:
          step: Training step (x axis in TensorBoard).
          scalars: Name -> Python/NumPy/JAX scalar. NaN and inf are null in the JSON line
            (valid JSON: `jaxsvr.files.json_text`) and kept in the TensorBoard event.
        """
        if not self._enabled:
            return
        if "step" in scalars:
            raise ValueError("'step' is reserved for the step number; rename that metric")
        if self._resume_step is not None and step <= self._resume_step:
            logging.info(
                "metrics of step %d were written before the checkpoint: kept as they are", step
            )
            return
        values = {k: _to_python(v) for k, v in scalars.items()}
        self._jsonl.write(json_text.dumps({"step": int(step), **values}) + "\n")
        summary = summary_pb2.Summary(
            value=[
                summary_pb2.Summary.Value(tag=k, simple_value=float(v)) for k, v in values.items()
            ]
        )
        self._events.write_event(
            event_pb2.Event(wall_time=time.time(), step=int(step), summary=summary)
        )

    def flush(self) -> None:
        """Writes pending events to disk (JSON lines are flushed on every write)."""
        if not self._enabled:
            return
        self._events.flush()
        self._jsonl.flush()
        if self._remote is not None:
            jsonl, events = self._staged
            write_bytes(self._remote / "metrics.jsonl", jsonl.read_bytes())
            write_bytes(self._remote / "tensorboard" / events.name, events.read_bytes())

    def close(self) -> None:
        """Flushes and closes both files; the writer must not be used afterwards."""
        if not self._enabled or self._jsonl.closed:
            return
        self.flush()
        self._events.close()
        self._jsonl.close()
        if self._remote is not None:
            shutil.rmtree(self._staged[0].parent, ignore_errors=True)

    def __enter__(self) -> MetricWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _keep_until(jsonl: Path, step: int) -> None:
    """Rewrites `jsonl` atomically without lines of step > `step` or unreadable ones."""
    kept, unreadable = [], []
    for number, raw in enumerate(jsonl.read_bytes().splitlines(), 1):
        try:
            line = raw.decode("utf-8")
            line_step = json.loads(line)["step"]
            if isinstance(line_step, bool) or not isinstance(line_step, int):
                raise TypeError(f"step {line_step!r}")
        except (ValueError, KeyError, TypeError):  # UnicodeDecodeError is a ValueError
            unreadable.append((number, raw))
            continue
        if line_step <= step:
            kept.append(line + "\n")
    if unreadable:
        # A crash mid-write can leave a torn last line; say so rather than fail the resume.
        number, raw = unreadable[0]
        logging.warning(
            "%s: dropping %d unreadable line(s) (not UTF-8 JSON with a step), the first at "
            "line %d: %.80r",
            jsonl,
            len(unreadable),
            number,
            raw,
        )
    write_text(jsonl, "".join(kept))

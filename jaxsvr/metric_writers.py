"""Training metrics to JSON lines and TensorBoard event files, without TensorFlow.

`MetricWriter` appends one JSON object per call to `WORKDIR/metrics.jsonl` (easy to grep,
load with pandas, or diff between runs) and one TensorBoard `Event` per call to
`WORKDIR/tensorboard/events.out.tfevents.<time>.<host>`. The event file is written by hand
(protobuf wire format inside TFRecord framing, crc32c in pure Python), so logging pulls in
neither TensorFlow, tensorboard nor protobuf; only viewing the curves needs tensorboard.

Only process 0 should write: other processes pass `enabled=False` and get a no-op writer.
A run that resumes from a checkpoint at step s passes `resume_step=s`: later JSON lines
(written after the checkpoint by the crashed run) are dropped, and the new event file opens
with a SessionLog START that makes TensorBoard discard the orphaned points. Lines that
cannot be read (not UTF-8, not a JSON object with an integer "step": a line torn by a crash,
or damage) are dropped too, with one warning that counts them. Metrics of steps up to s were
written before that checkpoint, so the resumed writer does not write them again: rerunning
a finished run (which evaluates its final state again) leaves `metrics.jsonl` as it was.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import struct
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

import numpy as np


def _make_crc32c_table() -> tuple[int, ...]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)  # Castagnoli, reflected
        table.append(crc)
    return tuple(table)


_CRC32C_TABLE = _make_crc32c_table()


def crc32c(data: bytes) -> int:
    """Returns the CRC-32C (Castagnoli) checksum of `data`, as TFRecord uses."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _CRC32C_TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc32c(data: bytes) -> int:
    """Returns crc32c(data) rotated and offset as TFRecord stores it."""
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def tfrecord(data: bytes) -> bytes:
    """Frames `data` as one TFRecord: length, masked crc of length, data, masked crc."""
    length = struct.pack("<Q", len(data))
    return (
        length
        + struct.pack("<I", masked_crc32c(length))
        + data
        + struct.pack("<I", masked_crc32c(data))
    )


# Protobuf wire format: each field is a varint key (field_number << 3 | wire_type), then a
# varint (type 0), 8 bytes (type 1), length-prefixed bytes (type 2) or 4 bytes (type 5).
def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1  # negative int64 encode as 10-byte two's complement
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _field(number: int, wire_type: int, payload: bytes) -> bytes:
    if wire_type == 2:
        payload = _varint(len(payload)) + payload
    return _varint(number << 3 | wire_type) + payload


def _event(wall_time: float, step: int = 0, **fields: bytes) -> bytes:
    """Serializes an Event: wall_time=1, step=2, file_version=3, summary=5, session_log=7."""
    out = _field(1, 1, struct.pack("<d", wall_time)) + _field(2, 0, _varint(step))
    numbers = {"file_version": 3, "summary": 5, "session_log": 7}
    return out + b"".join(_field(numbers[k], 2, v) for k, v in fields.items())


def _summary(scalars: Mapping[str, float]) -> bytes:
    """Serializes Summary(value=[Value(tag=1, simple_value=2 as float32), ...])."""
    return b"".join(
        _field(1, 2, _field(1, 2, tag.encode()) + _field(2, 5, struct.pack("<f", value)))
        for tag, value in scalars.items()
    )


_SESSION_LOG_START = _field(1, 0, _varint(1))  # SessionLog(status=START)


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
        workdir = Path(workdir)
        tb_dir = workdir / "tensorboard"
        tb_dir.mkdir(parents=True, exist_ok=True)
        jsonl = workdir / "metrics.jsonl"
        if resume_step is not None and jsonl.exists():
            _keep_until(jsonl, resume_step)
        mode = "a" if resume_step is not None else "w"
        self._jsonl = open(jsonl, mode, buffering=1, encoding="utf-8")

        name = f"events.out.tfevents.{int(time.time())}.{socket.gethostname()}"
        suffix = 0
        while True:  # a resume within the same second must not overwrite the old file
            path = tb_dir / (name if suffix == 0 else f"{name}.{suffix}")
            try:
                self._events = open(path, "xb", buffering=0)
                break
            except FileExistsError:
                suffix += 1
        # Records wait here and reach the file whole on flush(): a crash never leaves half
        # a record behind.
        self._pending = [tfrecord(_event(time.time(), file_version=b"brain.Event:2"))]
        if resume_step is not None:
            # TensorBoard drops every earlier point with step >= this event's step.
            start = _event(time.time(), resume_step + 1, session_log=_SESSION_LOG_START)
            self._pending.append(tfrecord(start))
        self.flush()

    def write_scalars(self, step: int, scalars: Mapping[str, float]) -> None:
        """Appends one JSON line `{"step": step, **scalars}` and one TensorBoard event.

        Args:
          step: Training step (x axis in TensorBoard).
          scalars: Name -> Python/NumPy/JAX scalar. NaN and inf are kept (JSON `NaN`).
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
        self._jsonl.write(json.dumps({"step": int(step), **values}) + "\n")
        summary = _summary({k: float(v) for k, v in values.items()})
        self._pending.append(tfrecord(_event(time.time(), int(step), summary=summary)))

    def flush(self) -> None:
        """Writes pending events to disk (JSON lines are flushed on every write)."""
        if not self._enabled:
            return
        data = memoryview(b"".join(self._pending))
        self._pending = []
        while data:
            data = data[self._events.write(data) :]
        self._jsonl.flush()

    def close(self) -> None:
        """Flushes and closes both files; the writer must not be used afterwards."""
        if not self._enabled or self._events.closed:
            return
        self.flush()
        self._events.close()
        self._jsonl.close()

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
    fd, tmp = tempfile.mkstemp(dir=jsonl.parent, prefix=".metrics.jsonl.")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.writelines(kept)
    os.chmod(tmp, jsonl.stat().st_mode)  # mkstemp makes 0600 files
    os.replace(tmp, jsonl)

"""Tests for `jaxsvr.train.metric_writers`: JSON lines, TensorBoard events (tensorboardX), resume.

The event files are checked twice: by decoding the TFRecord framing here against a bitwise
crc32c, and by reading them with the real tensorboard loaders, which is what a user will do.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest

from jaxsvr.train.metric_writers import MetricWriter

STEPS = {
    1: {"loss": 2.5, "lr": 1e-3, "epoch": 0},
    2: {"loss": np.float32(1.25), "lr": np.float64(2e-3), "epoch": np.int64(0)},
    3: {"loss": 0.1, "lr": 3e-3, "epoch": 1},
}


def _write_run(workdir: Path, steps=STEPS, **kwargs) -> None:
    with MetricWriter(workdir, **kwargs) as writer:
        for step, scalars in steps.items():
            writer.write_scalars(step, scalars)


def _event_files(workdir: Path) -> list[Path]:
    return sorted((workdir / "tensorboard").iterdir())


def _bitwise_crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 & -(crc & 1))
    return crc ^ 0xFFFFFFFF


def _masked(crc: int) -> int:
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _records(path: Path) -> list[bytes]:
    """Decodes TFRecord framing by hand, checking both masked CRCs of every record."""
    data, pos, records = path.read_bytes(), 0, []
    while pos < len(data):
        header = data[pos : pos + 8]
        (length,) = struct.unpack("<Q", header)
        (header_crc,) = struct.unpack("<I", data[pos + 8 : pos + 12])
        assert header_crc == _masked(_bitwise_crc32c(header))
        payload = data[pos + 12 : pos + 12 + length]
        (payload_crc,) = struct.unpack("<I", data[pos + 12 + length : pos + 16 + length])
        assert payload_crc == _masked(_bitwise_crc32c(payload))
        records.append(payload)
        pos += 16 + length
    assert pos == len(data)
    return records


def test_jsonl_round_trip(tmp_path):
    _write_run(tmp_path, {**STEPS, 4: {"loss": float("nan"), "lr": float("inf"), "epoch": 1}})
    lines = [
        json.loads(line, parse_constant=_not_json)  # NaN / Infinity are not JSON
        for line in (tmp_path / "metrics.jsonl").read_text().splitlines()
    ]
    assert [line["step"] for line in lines] == [1, 2, 3, 4]
    assert lines[1] == {"step": 2, "loss": 1.25, "lr": 2e-3, "epoch": 0}
    assert isinstance(lines[1]["epoch"], int) and isinstance(lines[1]["loss"], float)
    assert lines[3] == {"step": 4, "loss": None, "lr": None, "epoch": 1}  # null, valid JSON


def _not_json(word: str):
    raise AssertionError(f"{word} is not JSON")


def test_event_file_framing(tmp_path):
    _write_run(tmp_path)
    (path,) = _event_files(tmp_path)
    assert path.name.startswith("events.out.tfevents.")
    records = _records(path)
    assert len(records) == 1 + len(STEPS)
    assert b"brain.Event:2" in records[0]
    assert b"loss" in records[1] and struct.pack("<f", 2.5) in records[1]


def test_jsonl_flushed_before_close(tmp_path):
    writer = MetricWriter(tmp_path)
    writer.write_scalars(1, {"loss": 1.0})
    assert (tmp_path / "metrics.jsonl").read_text() == '{"step": 1, "loss": 1.0}\n'
    writer.flush()
    assert len(_records(_event_files(tmp_path)[0])) == 2
    writer.close()
    writer.close()  # idempotent


def test_tensorboard_event_file_loader(tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    from tensorboard.util.tensor_util import make_ndarray

    _write_run(tmp_path)
    (path,) = _event_files(tmp_path)
    events = list(EventFileLoader(str(path)).Load())
    assert events[0].file_version == "brain.Event:2"
    assert [e.step for e in events[1:]] == list(STEPS)
    for event, scalars in zip(events[1:], STEPS.values()):
        # The loader migrates simple_value into a scalar tensor of the scalars plugin.
        assert {v.metadata.plugin_data.plugin_name for v in event.summary.value} == {"scalars"}
        values = {v.tag: make_ndarray(v.tensor).item() for v in event.summary.value}
        assert values == {k: float(np.float32(v)) for k, v in scalars.items()}
        assert event.wall_time == pytest.approx(events[0].wall_time, abs=60)


def test_tensorboard_event_accumulator(tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    _write_run(tmp_path)
    acc = EventAccumulator(str(tmp_path / "tensorboard"))
    acc.Reload()
    assert sorted(acc.Tags()["scalars"]) == ["epoch", "loss", "lr"]
    loss = acc.Scalars("loss")
    assert [s.step for s in loss] == [1, 2, 3]
    np.testing.assert_allclose([s.value for s in loss], [2.5, 1.25, 0.1], rtol=1e-7)


def test_resume_drops_later_lines_and_starts_session(tmp_path):
    _write_run(tmp_path, {s: {"loss": float(s)} for s in range(1, 6)})
    with (tmp_path / "metrics.jsonl").open("a") as f:
        f.write('{"step": 6, "lo')  # torn line from a crash
    _write_run(tmp_path, {}, resume_step=3)

    steps = [
        json.loads(x)["step"] for x in (tmp_path / "metrics.jsonl").read_text().split("\n")[:-1]
    ]
    assert steps == [1, 2, 3]
    assert not list(tmp_path.glob(".metrics.jsonl.*"))  # no temp file left behind
    old, new = _event_files(tmp_path)
    start = _records(new)[1]
    # Event(step=4, session_log=SessionLog(status=START)): keys 0x10 and 0x3a, then 08 01.
    assert b"\x10\x04" in start and start.endswith(b"\x3a\x02\x08\x01")

    # With no further writes, TensorBoard must drop steps 4 and 5 of the first run.
    tb = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    acc = tb.EventAccumulator(str(tmp_path / "tensorboard"))
    acc.Reload()
    assert [(s.step, s.value) for s in acc.Scalars("loss")] == [(1, 1.0), (2, 2.0), (3, 3.0)]

    # The resumed run appends after the kept lines.
    _write_run(tmp_path, {4: {"loss": 40.0}}, resume_step=3)
    lines = (tmp_path / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(x) for x in lines][2:] == [
        {"step": 3, "loss": 3.0},
        {"step": 4, "loss": 40.0},
    ]


def test_session_log_start_read_by_tensorboard(tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

    _write_run(tmp_path, {}, resume_step=7)
    events = list(EventFileLoader(str(_event_files(tmp_path)[0])).Load())
    assert events[1].session_log.status == 1  # SessionLog.START
    assert events[1].step == 8


def test_fresh_run_truncates_jsonl(tmp_path):
    _write_run(tmp_path)
    _write_run(tmp_path, {10: {"loss": 1.0}})
    assert (tmp_path / "metrics.jsonl").read_text() == '{"step": 10, "loss": 1.0}\n'


def test_resume_without_existing_jsonl(tmp_path):
    _write_run(tmp_path, {5: {"loss": 1.0}}, resume_step=4)
    assert (tmp_path / "metrics.jsonl").read_text() == '{"step": 5, "loss": 1.0}\n'


def test_disabled_writes_nothing(tmp_path):
    workdir = tmp_path / "run"
    _write_run(workdir, enabled=False, resume_step=2)
    assert not workdir.exists()


def test_step_is_reserved(tmp_path):
    with MetricWriter(tmp_path) as writer, pytest.raises(ValueError, match="reserved"):
        writer.write_scalars(1, {"step": 1.0})


def test_resume_drops_non_utf8_and_unreadable_lines_with_one_warning(tmp_path, caplog):
    _write_run(tmp_path, {s: {"loss": float(s)} for s in range(1, 5)})
    with (tmp_path / "metrics.jsonl").open("ab") as f:
        f.write(b'{"step": 2, "loss": \xff\xfe}\n[1, 2]\n{"step": "3"}\n\x80\x81')
    with caplog.at_level("WARNING"):
        _write_run(tmp_path, {5: {"loss": 50.0}}, resume_step=3)
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "4 unreadable line(s)" in warnings[0], warnings
    rows = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3, 5]


def test_resumed_writer_skips_steps_already_written(tmp_path):
    """A finished run rerun evaluates its final step again: neither file gets it twice."""
    _write_run(tmp_path, {s: {"loss": float(s)} for s in range(1, 4)})
    before = (tmp_path / "metrics.jsonl").read_bytes()
    _write_run(tmp_path, {3: {"test/ndcg": 0.5}}, resume_step=3)
    assert (tmp_path / "metrics.jsonl").read_bytes() == before
    _, new = _event_files(tmp_path)
    assert len(_records(new)) == 2  # file version and SessionLog START only

"""The CPU engine's compiled kernel gives its NumPy passes' statistics bit for bit.

Every case runs `numpy_engine.query_stats` twice, with the kernel (`compiled=True`) and
without it (`compiled=False`), and compares every QueryStats field with `np.array_equal`:
ties between relevant and other items and among relevant items (small and large runs),
-0.0 beside 0.0, segments past NumPy's pairwise blocks (128), several blocks read through
transposed views, thresholds that round in float32, and the blocks the kernel leaves to
the NumPy passes (keys too wide, too many distinct gains).
"""

import dataclasses
import logging
import weakref
import zlib

import numpy as np
import pytest

from jaxsvr.evaluation import compiled_kernel, numpy_engine


def _stats(sim, rel, **kw):
    """Both ways, as lists of [v2t, t2v] field dicts."""
    return [
        numpy_engine.query_stats(sim, rel, compiled=compiled, **kw) for compiled in (True, False)
    ]


def _assert_equal(sim, rel, **kw):
    got, want = _stats(sim, rel, **kw)
    for direction, (a, b) in enumerate(zip(got, want)):
        for field in dataclasses.fields(b):
            x, y = getattr(a, field.name), getattr(b, field.name)
            assert x.dtype == y.dtype and np.array_equal(x, y), (direction, field.name)
    return got


@pytest.fixture
def refusals(monkeypatch):
    """Counts the blocks the kernel ranks and those it leaves to the NumPy passes."""
    seen = {"ranked": 0, "left": 0}
    inner = compiled_kernel.block_stats

    def counted(*args):
        out = inner(*args)
        seen["left" if out is None else "ranked"] += 1
        return out

    monkeypatch.setattr(compiled_kernel, "block_stats", counted)
    return seen


def test_the_kernel_is_built():
    assert compiled_kernel.load() is not None, (
        "jaxsvr/evaluation/_rank_kernel*.so is missing: pip install -e . builds it (needs a C "
        "compiler)"
    )


_SIMILARITY = {
    "tie_free": lambda rng, shape: rng.uniform(-1, 1, shape),
    "ties": lambda rng, shape: rng.integers(-3, 4, shape) / 3,
    "signed_zeros": lambda rng, shape: rng.choice([-0.0, 0.0, 0.5], shape),
    "constant": lambda rng, shape: np.full(shape, 0.25),
    "tiny": lambda rng, shape: rng.uniform(0, 1e-30, shape),
}
_RELEVANCE = {
    "graded": lambda rng, shape: rng.integers(0, 5, shape) / 4 * (rng.random(shape) < 0.4),
    "binary": lambda rng, shape: (rng.random(shape) < 0.3) * 1.0,
    "dense": lambda rng, shape: rng.choice([0.3, 0.5, 1.0], shape),
    "signed_zeros": lambda rng, shape: rng.choice([-0.0, 0.0, 0.5, 1.0], shape),
    "few_values": lambda rng, shape: rng.random(shape).round(1) * (rng.random(shape) < 0.3),
}


@pytest.mark.parametrize("relevance", sorted(_RELEVANCE))
@pytest.mark.parametrize("similarity", sorted(_SIMILARITY))
def test_equal_to_the_numpy_passes(similarity, relevance, refusals):
    rng = np.random.default_rng(zlib.crc32(f"{similarity} {relevance}".encode()))
    for n, m in ((1, 1), (7, 3), (37, 300), (5, 1000)):  # 1000: rows past pairwise blocks
        sim = _SIMILARITY[similarity](rng, (n, m)).astype(np.float32)
        rel = _RELEVANCE[relevance](rng, (n, m)).astype(np.float32)
        for threshold in (1.0, 0.5, 0.7):  # 0.7 rounds down in float32
            _assert_equal(sim, rel, threshold=threshold, workers=2)
    assert refusals["left"] == 0


def test_several_blocks_through_transposed_views(monkeypatch, refusals):
    monkeypatch.setattr(numpy_engine, "_BLOCK_BYTES", 64 << 10)  # 8-17 rows per block
    rng = np.random.default_rng(1)
    sim = rng.integers(-20, 20, (300, 1100)) / 20
    rel = rng.choice(np.float32([0, 0, 0, 0.25, 0.5, 1.0]), sim.shape)
    got = _assert_equal(sim.astype(np.float32), rel, threshold=0.75, workers=2)
    _assert_equal(np.asfortranarray(sim, np.float32), rel, workers=2)  # rows copied too
    assert got[0].tied.all() and refusals["left"] == 0 and refusals["ranked"] > 100


def test_blocks_left_to_the_numpy_passes(refusals):
    rng = np.random.default_rng(2)
    wide = rng.uniform(-1e3, 1e3, (40, 200)).astype(np.float32)  # keys span >= 2^31
    rel = (rng.random(wide.shape) < 0.3).astype(np.float32)
    _assert_equal(wide, rel, workers=1)
    assert refusals == {"ranked": 0, "left": 2}
    continuous = np.where(rng.random(wide.shape) < 0.5, rng.random(wide.shape), 0)
    _assert_equal(wide / 1e4, continuous.astype(np.float32), workers=1)  # > 255 gains
    assert refusals == {"ranked": 0, "left": 3}  # the second direction was not tried


def test_large_runs_of_tied_relevant_items():
    """Rows of hundreds of relevant items with one similarity, and mixed runs of 2-40:
    their gains go in ascending order (counted, or sorted in runs of up to 16)."""
    rng = np.random.default_rng(3)
    sim = np.concatenate([np.zeros((30, 400)), rng.integers(0, 40, (30, 800)) / 40], axis=1)
    rel = rng.choice(np.float32([0, 0.1, 0.2, 0.6, 0.9, 1.0]), sim.shape)
    _assert_equal(sim.astype(np.float32), rel, threshold=0.6)


def test_streamed_row_blocks_take_the_kernel(refusals):
    rng = np.random.default_rng(4)
    s = rng.integers(0, 9, (20, 50)).astype(np.float32) / 8
    r = rng.choice(np.float32([0, 0.5, 1]), s.shape)
    got = numpy_engine.RowBlocks(s.size, compiled=True)(s, r, 0.5)
    want = numpy_engine.RowBlocks(s.size, compiled=False)(s, r, 0.5)
    assert got.keys() == want.keys() and refusals["ranked"] == 1
    for name, value in want.items():
        assert np.array_equal(got[name], value), name


def test_off_switch_an_old_kernel_a_foreign_one_and_none(monkeypatch, caplog):
    caplog.set_level(logging.INFO)
    monkeypatch.setenv("JAXSVR_COMPILED_KERNEL", "0")
    assert compiled_kernel.load.__wrapped__() is None
    assert "JAXSVR_COMPILED_KERNEL=0" in caplog.text
    monkeypatch.delenv("JAXSVR_COMPILED_KERNEL")
    monkeypatch.setattr(compiled_kernel, "VERSION", compiled_kernel.VERSION + 1)
    assert compiled_kernel.load.__wrapped__() is None
    assert "out of date: rebuild it with pip install -e ." in caplog.text
    monkeypatch.setattr(compiled_kernel, "VERSION", compiled_kernel.VERSION - 1)

    def foreign(path):
        raise OSError(f"{path}: wrong ELF class")

    monkeypatch.setattr(compiled_kernel.ctypes, "CDLL", foreign)
    assert compiled_kernel.load.__wrapped__() is None
    assert "does not load (" in caplog.text and "wrong ELF class" in caplog.text
    monkeypatch.setattr(compiled_kernel, "load", lambda: None)
    with pytest.raises(RuntimeError, match="not available: reinstall jaxsvr with a C compiler"):
        numpy_engine.query_stats(
            np.eye(3, dtype=np.float32), np.eye(3, dtype=np.float32), compiled=True
        )
    assert compiled_kernel.required(None) is None  # the NumPy passes, silently


def test_the_tables_it_reads_outlive_the_call(monkeypatch):
    """A discount table another thread has just dropped from the shared cache is held by
    the call that hands it to the kernel (a pointer into a freed temporary gave nDCG of
    NaN on first calls with two threads)."""
    from jaxsvr.evaluation import query_stats

    freed = []

    def uncached(table):
        def fresh(n_items):
            copy = table(n_items).copy()
            weakref.finalize(copy, freed.append, n_items)
            return copy

        return fresh

    for name in ("discounts", "cumulative_discounts"):
        monkeypatch.setattr(compiled_kernel, name, uncached(getattr(query_stats, name)))
    lib = compiled_kernel.load()

    class Checked:
        jaxsvr_build = lib.jaxsvr_build

        def jaxsvr_stats(self, *args):
            assert not freed, "a table was freed before the kernel read it"
            return lib.jaxsvr_stats(*args)

    rng = np.random.default_rng(5)
    s = rng.uniform(-1, 1, (6, 50)).astype(np.float32)
    r = rng.choice(np.float32([0, 0.5, 1.0]), s.shape)
    got = compiled_kernel.block_stats(Checked(), s, r, 1.0, compiled_kernel.Scratch(s.size))
    assert freed == [50, 50]  # once the call returned
    assert np.array_equal(got["dcg"], numpy_engine.RowBlocks(s.size, compiled=False)(s, r)["dcg"])


def test_the_portable_compaction_without_avx2():
    """CPUs without AVX2 find the flagged and relevant positions one item at a time: the
    same statistics (rows shorter than, equal to and past 32-item chunks)."""
    lib = compiled_kernel.load()
    rng = np.random.default_rng(6)
    try:
        lib.jaxsvr_set_simd(0)
        for m in (1, 31, 32, 33, 300):
            sim = rng.integers(0, 9, (40, m)).astype(np.float32) / 8
            rel = rng.choice(np.float32([0, 0, -0.0, 0.5, 1.0]), sim.shape)
            _assert_equal(sim, rel, threshold=0.5, workers=2)
    finally:
        lib.jaxsvr_set_simd(1)


def test_unaligned_arrays_other_dtypes_and_rows_without_items():
    """Unaligned float32 arrays are copied before the kernel reads them; blocks of other
    dtypes and blocks without items get what the NumPy passes give (for the latter, their
    error), never a read or write past a buffer."""
    rng = np.random.default_rng(7)
    sim = rng.integers(0, 9, (30, 70)).astype(np.float32) / 8
    rel = rng.choice(np.float32([0, 0.5, 1.0]), sim.shape)
    unaligned = []
    for a in (sim, rel):
        raw = np.zeros(a.nbytes + 1, np.uint8)
        view = np.frombuffer(raw.data, np.float32, a.size, offset=1).reshape(a.shape)
        view[...] = a
        unaligned.append(view)
    assert not unaligned[0].flags.aligned
    _assert_equal(*unaligned, threshold=0.5, workers=2)
    for dtype in (">f4",):  # byte-swapped float32 from direct `RowBlocks` callers: NumPy
        s, r = sim.astype(dtype), rel.astype(dtype)
        got = numpy_engine.RowBlocks(s.size, compiled=True)(s, r, 0.5)
        want = numpy_engine.RowBlocks(s.size, compiled=False)(s, r, 0.5)
        assert all(np.array_equal(got[k], v) for k, v in want.items()), dtype
    empty = np.zeros((64, 0), np.float32)
    for compiled in (True, False):
        with pytest.raises(ValueError, match="zero-size"):
            numpy_engine.RowBlocks(0, compiled=compiled)(empty, empty)


@pytest.mark.parametrize("simd", [1, 0])
def test_column_copies_are_the_transposed_bits(simd):
    """Text-to-video blocks are copied from transposed views by 8 x 8 register transposes
    (or 16-item tiles without AVX2): every shape's edges, bits as they are (-0.0 too)."""
    lib = compiled_kernel.load()
    rng = np.random.default_rng(8)
    matrix = rng.standard_normal((70, 45)).astype(np.float32)
    matrix[::3, ::2] = -0.0
    try:
        lib.jaxsvr_set_simd(simd)
        for n, m in ((1, 1), (7, 9), (8, 8), (17, 70), (45, 64), (45, 70)):
            for start in (0, 45 - n):
                src = matrix.T[start : start + n, :m]
                out = np.full((n, m), np.nan, np.float32)
                assert compiled_kernel.copy_columns(lib, src, out)
                assert np.array_equal(out.view(np.uint32), src.view(np.uint32)), (n, m, start)
    finally:
        lib.jaxsvr_set_simd(1)
    assert not compiled_kernel.copy_columns(lib, matrix[:4], np.empty((4, 45), np.float32))

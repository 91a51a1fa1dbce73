"""What a compiled evaluation kernel would save (issue 31 part 5): a trial, not an engine.

`evaluation_speed.py --kinds compiled_trial compiled_trial_c`. The trial ranks the blocks
`numpy_engine.query_stats` ranks, with NumPy's own row sort (x86-simd-sort), and replaces
every other pass with two compiled kernels per block, written twice: in numba
(`compiled_kernel_numba.py`; needs numba, which jaxsvr does not depend on) and in C
(`compiled_kernel_trial.c`; built by the system's C compiler into benchmarks/__pycache__
once, as an install would build an extension, and called through ctypes):

- `build`: fold each similarity into the 32-bit path's key (`narrow_keys`), per row:
  descending order, shifted left by one, the low bit set where R > 0; each row's relevant
  entries (key, gain code) in one pass, no mask or `flatnonzero`.
- `stats`: per row, the flagged positions of the sorted keys (branch-free compaction),
  each one's gain from a hash of the row's relevant keys (instead of the sort of the
  relevant entries), and every `QueryStats` sum in one loop over them; the ideal ranking
  from counts per gain code.

Text-to-video blocks are copied from the transposed views in tiles by NumPy first (its
strided copy is faster than the trial's own loops), then treated as rows. The sums run in
another order than the engine's (`np.add.reduceat`), so statistics agree to about 1e-15
relative, not bit for bit; counts and ranks agree exactly. Relevant items with equal
similarity in one row (the engine orders them by gain) are not handled: the trial counts
them and the report says how many there were (`unhandled`: none with the benchmark's
tie-free similarity). Blocks whose keys span 2^31 values or more (the engine's packed
path) or that hold more than 255 distinct gains stop the trial with an error.

Measured alternately with the engine in one process, on the same inputs and threads;
both kernels compile for the x86-64-v3 level (AVX2, no AVX-512) when NumPy runs its AVX2
code, as CPUs without AVX-512 would. `load_seconds` is what a process pays before its
first call: numba's import (its kernels then load from numba's cache, or compile, in the
first small call), or loading the C library (building it first where it is missing).
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

_FIELDS_F = ("dcg", "dcg_exp", "dcg_nocut", "idcg", "idcg_exp", "ap_graded", "ap_binary")
_FIELDS_I = ("n_rel", "n_one", "n_pos", "first_pos", "last_pos")
_SLOTS = 4096  # the gain-code table (as `query_stats._few_gains`)
_TILE = 512  # items per tile of a transposed copy (as `numpy_engine._TILE`)
HERE = Path(__file__).resolve().parent


def load(kernel: str):
    """(build, stats) of `kernel`: "numba" (`compiled_kernel_numba.py`) or "c"
    (`compiled_kernel_trial.c`, built by `cc` once into benchmarks/__pycache__, as an
    install would build it, then loaded through ctypes, which releases the GIL)."""
    if kernel == "numba":
        import compiled_kernel_numba  # beside this script

        return compiled_kernel_numba.build, compiled_kernel_numba.stats
    source = HERE / "compiled_kernel_trial.c"
    avx2 = "-march=x86-64-v3" if os.environ.get("NPY_DISABLE_CPU_FEATURES") else "-march=native"
    tag = hashlib.sha256(source.read_bytes() + avx2.encode()).hexdigest()[:12]
    library = HERE / "__pycache__" / f"compiled_kernel_trial.{tag}.so"
    if not library.exists():
        library.parent.mkdir(exist_ok=True)
        partial = library.with_suffix(".partial")
        cc = os.environ.get("CC", "cc")
        subprocess.run([cc, "-O3", avx2, "-shared", "-fPIC", "-o", partial, source], check=True)
        partial.replace(library)
    return _c_kernels(ctypes.CDLL(str(library)))


def _c_kernels(lib):
    """The C functions with the numba kernels' signatures (arrays C-contiguous)."""
    p, i64, f64 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_double
    lib.build.restype = lib.stats.restype = i64
    lib.build.argtypes = [p, p, i64, i64] + [p] * 8 + [i64]
    lib.stats.argtypes = [p, i64, i64, p, p, p, p, p, p, i64, f64, p, p, p, p]

    def ptr(a):
        assert a.flags.c_contiguous, "the C kernels take C-contiguous arrays"
        return a.ctypes.data

    def build(s, r, keys, folded, rk, rg, rc, rowptr, table, codes, n_codes):
        arrays = (keys, folded, rk, rg, rc, rowptr, table, codes)
        return lib.build(ptr(s), ptr(r), *s.shape, *map(ptr, arrays), n_codes)

    def stats(keys, rk, rc, rowptr, value, exp_value, order, threshold, disc, cum, f, i):
        head = (ptr(keys), *keys.shape, ptr(rk), ptr(rc), ptr(rowptr), ptr(value))
        tail = (ptr(exp_value), ptr(order), len(value), threshold, ptr(disc), ptr(cum))
        return lib.stats(*head, *tail, ptr(f), ptr(i))

    return build, stats


def trial_query_stats(sim, rel, kernels, *, threshold: float = 1.0, workers: int | None = None):
    """(v2t, t2v) statistics as {field: [n] array} and the rows the trial does not handle,
    with `kernels` = `load(...)`."""
    from jaxsvr.evaluation import numpy_engine
    from jaxsvr.evaluation.query_stats import cumulative_discounts, discounts

    build, stats = kernels
    workers = workers or min(4, os.cpu_count() or 1)
    sb, rb = sim.view(np.int32), rel.view(np.uint32)
    shapes = (sim.shape, sim.shape[::-1])
    rows = [numpy_engine.block_rows(m) for _, m in shapes]
    size = max(r * m for r, (_, m) in zip(rows, shapes))  # items of the largest block
    out_f = [np.zeros((n, len(_FIELDS_F))) for n, _ in shapes]
    out_i = [np.zeros((n, len(_FIELDS_I) + 1), np.int64) for n, _ in shapes]
    local = threading.local()  # scratch per thread, for blocks of both directions
    unhandled = []

    def work(job):
        d, start = job
        m, block = shapes[d][1], np.s_[start : start + rows[d]]
        if not hasattr(local, "keys"):
            local.keys, local.s, local.r = (
                np.empty(size, t) for t in (np.uint32, np.int32, np.uint32)
            )
            local.folded = np.empty(max(sim.shape), np.int64)
            local.rk, local.rg, local.rc = (
                np.empty(size, t) for t in (np.uint32, np.uint32, np.uint8)
            )
            local.rowptr = np.empty(max(rows) + 1, np.int64)
            local.table, local.codes = np.zeros(_SLOTS, np.uint32), np.zeros(_SLOTS, np.uint8)
        if d == 0:
            s, r = sb[block], rb[block]
        else:  # NumPy copies the transposed views in tiles
            nn = sb[:, block].shape[1]
            s, r = (a[: nn * m].reshape(nn, m) for a in (local.s, local.r))
            for t in range(0, m, _TILE):
                np.copyto(s[:, t : t + _TILE], sb[t : t + _TILE, block].T)
                np.copyto(r[:, t : t + _TILE], rb[t : t + _TILE, block].T)
        keys = local.keys[: s.size].reshape(s.shape)
        n_codes = int(np.count_nonzero(local.table))
        entries = (local.rk, local.rg, local.rc, local.rowptr)
        got = build(s, r, keys, local.folded, *entries, local.table, local.codes, n_codes)
        if got < 0:
            raise ValueError("a block the trial does not handle (wide keys or > 255 gains)")
        keys.sort(axis=1)
        used = np.flatnonzero(local.table)
        value = np.zeros(got)
        value[local.codes[used]] = local.table[used].view(np.float32)
        exp_value = np.exp2(value) - 1.0
        order = np.argsort(-value, kind="stable")
        tables = (discounts(m), cumulative_discounts(m))
        args = (value, exp_value, order, threshold, *tables, out_f[d][block], out_i[d][block])
        unhandled.append(stats(keys, local.rk, local.rc, local.rowptr, *args))

    jobs = [(d, start) for d, (n, _) in enumerate(shapes) for start in range(0, n, rows[d])]
    with ThreadPoolExecutor(workers) as pool:  # as the engine: blocks go as threads free up
        list(pool.map(work, jobs))
    results = []
    for f, i in zip(out_f, out_i):
        fields = dict(zip(_FIELDS_F, f.T))
        fields.update(zip(_FIELDS_I, i.T))
        fields["tied"] = i[:, -1].astype(bool)
        results.append(fields)
    return results, sum(unhandled)


def compiled_trial(sim, rel, kernel: str = "numba", rounds: int = 5) -> dict:
    """Seconds (wall and CPU) per call of the NumPy engine and of the trial, alternating in
    this process on the same inputs; the kernels' loading and first call; agreement."""
    from jaxsvr.evaluation import numpy_engine

    out: dict = {"kernel": kernel}
    start = time.perf_counter()
    kernels = load(kernel)  # numba: its import; C: the library, built before if need be
    out["load_seconds"] = time.perf_counter() - start
    start = time.perf_counter()
    trial_query_stats(np.zeros((8, 8), np.float32), np.eye(8, dtype=np.float32), kernels)
    out["first_call_small_seconds"] = time.perf_counter() - start  # numba: compile or cache
    timings: dict = {"engine": [], "trial": []}
    for _ in range(rounds):
        for name in ("engine", "trial"):
            start, cpu = time.perf_counter(), time.process_time()
            if name == "engine":
                ref = numpy_engine.query_stats(sim, rel)
            else:
                got, unhandled = trial_query_stats(sim, rel, kernels)
            timings[name].append((time.perf_counter() - start, time.process_time() - cpu))
    for name, values in timings.items():
        out[f"{name}_seconds"] = [w for w, _ in values]
        out[f"{name}_cpu_seconds"] = [c for _, c in values]
    worst, equal = 0.0, True
    for d in (0, 1):
        for f in _FIELDS_F:
            a, b = got[d][f], getattr(ref[d], f)
            worst = max(worst, float(np.max(np.abs(a - b) / np.maximum(np.abs(b), 1e-300))))
        for f in (*_FIELDS_I, "tied"):
            equal &= bool(np.array_equal(got[d][f], getattr(ref[d], f)))
    out.update(max_relative_difference=worst, counts_and_ranks_equal=equal, unhandled=unhandled)
    return out

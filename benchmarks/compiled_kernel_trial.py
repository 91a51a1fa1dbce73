"""What a compiled evaluation kernel would save (issue 31 part 5): a trial, not an engine.

`evaluation_speed.py --kinds compiled_trial` (needs numba, which jaxsvr does not depend on:
`pip install numba` beside it). The trial ranks the blocks `numpy_engine.query_stats`
ranks, with NumPy's own row sort (x86-simd-sort), and replaces every other pass with two
numba kernels per block:

- `_build`: fold each similarity into the 32-bit path's key (`narrow_keys`), per row:
  descending order, shifted left by one, the low bit set where R > 0; each row's relevant
  entries (key, gain code) in one pass, no mask or `flatnonzero`.
- `_stats`: per row, the flagged positions of the sorted keys (branch-free compaction),
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
the numba code compiles for the x86-64-v3 level (AVX2, no AVX-512) when NumPy runs its
AVX2 code, as CPUs without AVX-512 would.
"""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

_FIELDS_F = ("dcg", "dcg_exp", "dcg_nocut", "idcg", "idcg_exp", "ap_graded", "ap_binary")
_FIELDS_I = ("n_rel", "n_one", "n_pos", "first_pos", "last_pos")
_SLOTS = 4096  # the gain-code table (as `query_stats._few_gains`)
_TILE = 512  # items per tile of a transposed copy (as `numpy_engine._TILE`)


if os.environ.get("NPY_DISABLE_CPU_FEATURES") and "NUMBA_CPU_NAME" not in os.environ:
    os.environ["NUMBA_CPU_NAME"] = "x86-64-v3"  # NumPy runs its AVX2 code: numba's too
try:
    import numba
except ImportError:
    raise SystemExit("error: the compiled-kernel trial needs numba: pip install numba") from None

_jit = numba.njit(nogil=True, cache=True)  # compiled once, then loaded from numba's cache
_inline = numba.njit(nogil=True, cache=True, inline="always")


@_inline
def _fold(b):  # the signed-monotone bits of 0 - s, from the int32 bits b of s
    u = (np.int64(b) & 0xFFFFFFFF) ^ 0x80000000
    u = 0 if u == 0x80000000 else u  # 0 - (+0.0) is +0.0
    c = u - ((u >> 31) << 32)
    return c ^ ((c >> 63) & 0x7FFFFFFF)


@_inline
def _slot_of(bits, shift, mask):  # Fibonacci hashing
    return np.int64((((np.uint64(bits) * np.uint64(0x9E3779B1)) & 0xFFFFFFFF) >> shift) & mask)


@_jit
def _build(sb, rb, keys, folded, rk, rg, rc, rowptr, table, codes, n_codes):
    """sb, rb: [n, m] int32 / uint32 bits of S and R. Returns the number of gain codes,
    -1 where a row's keys span 2^31 values or more, -2 where the code table is full."""
    n, m = sb.shape
    nnz = 0
    rowptr[0] = 0
    for i in range(n):
        lo = np.int64(1) << 40
        hi = -lo
        for j in range(m):
            c = _fold(sb[i, j])
            folded[j] = c
            lo = min(lo, c)
            hi = max(hi, c)
        if hi - lo >= np.int64(1) << 31:
            return -1
        for j in range(m):
            g = rb[i, j]
            flag = np.uint32((g & 0x7FFFFFFF) != 0)  # R > 0 (-0.0 is not)
            k = np.uint32((np.int64(folded[j]) - lo) << 1) | flag
            rk[nnz] = k
            rg[nnz] = g
            nnz += flag
            keys[i, j] = k
        rowptr[i + 1] = nnz
    for e in range(nnz):  # gain codes through the table of distinct gain bits
        s = _slot_of(rg[e], np.uint64(32 - 12), np.uint64(_SLOTS - 1))
        for _ in range(_SLOTS):
            if table[s] == rg[e] or table[s] == 0:
                break
            s = (s + 1) & (_SLOTS - 1)
        if table[s] == 0:
            if n_codes == 255:
                return -2
            table[s] = rg[e]
            codes[s] = n_codes
            n_codes += 1
        rc[e] = codes[s]
    return n_codes


@_jit
def _stats(keys, rk, rc, rowptr, value, exp_value, order, threshold, disc, cum, out_f, out_i):
    """keys: [n, m] sorted rows; value / exp_value: r and 2^r - 1 of each code; order:
    codes by descending value. Returns the rows with relevant items of equal keys."""
    n, m = keys.shape
    size = 1
    while size < 2 * m:
        size <<= 1
    bits = 0
    while (1 << bits) < size:
        bits += 1
    shift, mask = np.uint64(32 - bits), np.uint64(size - 1)
    empty = np.uint32(0xFFFFFFFF)  # never a key: keys are even or have the flag bit
    hkey = np.full(size, empty, np.uint32)
    hcode = np.zeros(size, np.uint8)
    flagged = np.empty(m + 1, np.int64)
    per_code = np.zeros(value.size, np.int64)
    unhandled = 0
    for i in range(n):
        a0, a1 = rowptr[i], rowptr[i + 1]
        n_rel = a1 - a0
        for e in range(a0, a1):
            h = _slot_of(rk[e], shift, mask)
            while hkey[h] != empty and hkey[h] != rk[e]:
                h = (h + 1) & (size - 1)
            if hkey[h] == rk[e]:
                unhandled += 1  # equal keys among relevant items
            hkey[h] = rk[e]
            hcode[h] = rc[e]
        row = keys[i]
        count = 0
        for p in range(m):
            flagged[count] = p
            count += row[p] & 1
        tied = 0
        for p in range(1, m):
            tied |= (row[p] ^ row[p - 1]) <= 1
        dcg = dcg_exp = dcg_nocut = running = ap_graded = ap_binary = 0.0
        n_one = n_pos = first = last = 0
        for t in range(n_rel):
            p = flagged[t]
            h = _slot_of(row[p], shift, mask)
            while hkey[h] != row[p]:
                h = (h + 1) & (size - 1)
            c = hcode[h]
            per_code[c] += 1
            g, d = value[c], disc[p]
            dcg_nocut += g * d
            if p < n_rel:
                dcg += g * d
                dcg_exp += exp_value[c] * d
            running += g
            if g == 1.0:
                n_one += 1
                ap_graded += running / (p + 1.0)
                ap_binary += n_one / (p + 1.0)
            if g >= threshold:
                n_pos += 1
                first = p + 1 if first == 0 else first
                last = p + 1
        idcg = idcg_exp = 0.0
        a = 0
        for c in order:
            if per_code[c]:
                b = a + per_code[c]
                idcg += value[c] * (cum[b] - cum[a])
                idcg_exp += exp_value[c] * (cum[b] - cum[a])
                per_code[c] = 0
                a = b
        out_f[i, 0], out_f[i, 1], out_f[i, 2] = dcg, dcg_exp, dcg_nocut
        out_f[i, 3], out_f[i, 4], out_f[i, 5], out_f[i, 6] = idcg, idcg_exp, ap_graded, ap_binary
        out_i[i, 0], out_i[i, 1], out_i[i, 2] = n_rel, n_one, n_pos
        out_i[i, 3], out_i[i, 4], out_i[i, 5] = first, last, tied
        for e in range(a0, a1):  # empty the row's chains
            h = _slot_of(rk[e], shift, mask)
            while hkey[h] != empty:
                hkey[h] = empty
                h = (h + 1) & (size - 1)
    return unhandled


def trial_query_stats(sim, rel, *, threshold: float = 1.0, workers: int | None = None):
    """(v2t, t2v) statistics as {field: [n] array} and the rows the trial does not handle."""
    from jaxsvr.evaluation import numpy_engine
    from jaxsvr.evaluation.query_stats import cumulative_discounts, discounts

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
        got = _build(s, r, keys, local.folded, *entries, local.table, local.codes, n_codes)
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
        unhandled.append(_stats(keys, local.rk, local.rc, local.rowptr, *args))

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


def compiled_trial(sim, rel, rounds: int = 5) -> dict:
    """Seconds (wall and CPU) per call of the NumPy engine and of the trial, alternating in
    this process on the same inputs; numba's import and first-call costs; agreement."""
    from jaxsvr.evaluation import numpy_engine

    out: dict = {}
    out["numba"], out["numba_cpu"] = numba.__version__, os.environ.get("NUMBA_CPU_NAME", "host")
    start = time.perf_counter()
    trial_query_stats(np.zeros((8, 8), np.float32), np.eye(8, dtype=np.float32))
    out["first_call_small_seconds"] = time.perf_counter() - start  # compile or cache load
    timings: dict = {"engine": [], "trial": []}
    for _ in range(rounds):
        for name in ("engine", "trial"):
            start, cpu = time.perf_counter(), time.process_time()
            if name == "engine":
                ref = numpy_engine.query_stats(sim, rel)
            else:
                got, unhandled = trial_query_stats(sim, rel)
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

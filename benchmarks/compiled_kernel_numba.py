"""The compiled-kernel trial's two kernels in numba (`compiled_kernel_trial.py`, which
describes them; `compiled_kernel_trial.c` holds the same in C). Needs numba, which jaxsvr
does not depend on."""

from __future__ import annotations

import os

import numpy as np

_SLOTS = 4096  # the gain-code table (as `query_stats._few_gains`)

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


build, stats = _build, _stats

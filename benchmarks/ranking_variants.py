"""The ranking step of the EK-100 evaluation alone, two ways (`evaluation_speed.py
--kinds ranking`): the NumPy engine's packed int64 row sort against a float32 row sort
plus a `searchsorted` of each row's relevant items (issue 18's idea)."""

from __future__ import annotations

import time


def ranking_variants(sim, rel) -> dict:
    """Seconds of the video-to-text ranking alone, one thread, in ~4 MB row blocks: the
    engine's packed int64 sort against float32 sort + searchsorted of the relevant items."""
    import numpy as np

    n_items = sim.shape[1]
    rows = (4 << 20) // (8 * n_items)
    packed = float32 = 0.0
    for start in range(0, sim.shape[0], rows):
        s, r = sim[start : start + rows], rel[start : start + rows]
        t = time.perf_counter()
        bits = (s + np.float32(0)).view(np.int32)
        desc = bits ^ ((~bits >> 31) | np.int32(-(2**31)))
        keys = (desc.astype(np.int64) << 32) | r.view(np.uint32).astype(np.int64)
        keys.sort(axis=1)
        ranked = np.flatnonzero(keys & 0xFFFFFFFF)
        packed += time.perf_counter() - t
        t = time.perf_counter()
        srt = np.sort(s, axis=1)
        flat = np.flatnonzero(r)
        row, col = np.divmod(flat, n_items)
        # the relevant items of each row sorted by similarity (what makes the search
        # fast): one sort of (row, signed-monotone similarity bits) packed in an int64
        vb = (s.ravel()[flat] + np.float32(0)).view(np.int32)
        mono = vb ^ ((vb >> 31) & np.int32(0x7FFFFFFF))
        packed_rows = (row.astype(np.int64) << 32) + (mono.astype(np.int64) + 2**31)
        packed_rows.sort()
        row = packed_rows >> 32
        mono = ((packed_rows & 0xFFFFFFFF) - 2**31).astype(np.int32)
        values = (mono ^ ((mono >> 31) & np.int32(0x7FFFFFFF))).view(np.float32)
        bounds = np.searchsorted(row, np.arange(len(s) + 1))
        placed = np.empty(values.size, np.int64)
        for i in range(len(s)):
            a, b = bounds[i], bounds[i + 1]
            placed[a:b] = np.searchsorted(srt[i], values[a:b], side="right")
        float32 += time.perf_counter() - t
        assert ranked.size == placed.size
        assert np.array_equal(np.sort(s.ravel()[flat]), np.sort(values))
    return {"packed_int64_sort": packed, "float32_sort_searchsorted": float32}

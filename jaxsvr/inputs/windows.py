"""Local temporal context (ConTra): windows of neighbouring clips.

Clips are grouped by video in narration order (`Clips.video_clips`). The window of clip j
with half-width m is clips j - m .. j + m of the same video; at the start / end of a video
the first / last clip is repeated to fill it, as the public ConTra code does
(adrianofragomeni/ConTra, `loader_sequence.create_sequences`). `context_windows` gives the
[N, 2m + 1] row indices (centre in column m; m = 0 is the clip alone), and the trainer
and evaluator gather features and tokens through them at batch time: no per-window copies
are stored.

ConTra's neighbour negatives are drawn from these windows in `jaxsvr.sampling.neighbours`.
"""

from __future__ import annotations

import numpy as np

from jaxsvr.annotations.epic100 import Clips
from jaxsvr.errors import InputError


def context_windows(clips: Clips, m: int) -> np.ndarray:
    """[N, 2m + 1] int32 rows of each clip's window, centre in column m.

    Args:
      clips: the clip table (rows in any order; windows follow narration order per video).
      m: half-width, >= 0.
    """
    if m < 0:
        raise InputError(f"a context window half-width must be >= 0, got {m}")
    out = np.empty((len(clips), 2 * m + 1), np.int32)
    offsets = np.arange(-m, m + 1)
    for rows in clips.video_clips().values():  # each video's rows in narration order
        pos = np.clip(np.arange(rows.size)[:, None] + offsets[None], 0, rows.size - 1)
        out[rows] = rows[pos]
    return out

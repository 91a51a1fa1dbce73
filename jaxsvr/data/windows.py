"""Local temporal context (ConTra): windows of neighbouring clips, and neighbour negatives.

Clips are grouped by video in narration order (`Clips.video_clips`). The window of clip j
with half-width m is clips j - m .. j + m of the same video; at the start / end of a video
the first / last clip is repeated to fill it, as the public ConTra code does
(adrianofragomeni/ConTra, `loader_sequence.create_sequences`). `context_windows` gives the
[N, 2m + 1] row indices (centre in column m; m = 0 is the clip alone), and the trainer
and evaluator gather features and tokens through them at batch time: no per-window copies
are stored.

Neighbour negatives (ConTra's neighbouring loss): for clip i, the positions of its window
(half-width max(m_video, m_text), as the public code) whose clip's narration differs from
clip i's. `Neighbours.draw` picks one of them uniformly (repeated edge clips count once per
position, as in the public code) with a generator the caller seeds from (seed, epoch,
step), and says which clips have none (all their neighbours share their narration).
"""

from __future__ import annotations

import numpy as np

from jaxsvr.data.epic100 import Clips
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


def text_ids(narrations: list[str]) -> np.ndarray:
    """[N] int64: equal ids for equal narration strings."""
    _, ids = np.unique(np.asarray(narrations, dtype=object).astype(str), return_inverse=True)
    return ids.astype(np.int64)


class Neighbours:
    """Neighbour negatives: clips of a clip's window with another narration.

    Args:
      narrations: the narration of every clip (row order of the table).
      windows: [N, W] rows of each clip's window (`context_windows`).
    """

    def __init__(self, narrations: list[str], windows: np.ndarray):
        ids = text_ids(narrations)
        self.windows = windows
        self.valid = ids[windows] != ids[:, None]  # [N, W] positions with another narration
        self.count = self.valid.sum(axis=1)

    def draw(self, rows: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """One neighbour per row, uniform over its valid window positions.

        Returns:
          (neighbour rows [B] int32, has_neighbour [B] bool); a row without a neighbour
          gets itself and False.
        """
        rows = np.asarray(rows)
        count = self.count[rows]
        pick = (rng.random(rows.size) * np.maximum(count, 1)).astype(np.int64)  # k-th valid
        valid = self.valid[rows]
        position = np.argmax(np.cumsum(valid, axis=1) > pick[:, None], axis=1)
        has = count > 0
        chosen = self.windows[rows, position]
        return np.where(has, chosen, rows).astype(np.int32), has

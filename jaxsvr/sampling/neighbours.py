"""ConTra's neighbour negatives: clips of a clip's context window with another narration.

For clip i, the positions of its window (half-width max(m_video, m_text), as the public
code; `jaxsvr.inputs.windows`) whose clip's narration differs from clip i's.
`Neighbours.draw` picks one of them uniformly (repeated edge clips count once per
position, as in the public code) with a generator the caller seeds from (seed, epoch,
step), and says which clips have none (all their neighbours share their narration);
`draw_many` picks K at distinct positions (the paper's K neighbour negatives).
"""

from __future__ import annotations

import numpy as np

from jaxsvr.annotations.epic100 import text_ids


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

    def draw_many(
        self, rows: np.ndarray, rng: np.random.Generator, k: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """`k` neighbours per row at distinct valid window positions, uniformly (ConTra's
        K neighbour negatives, its Table 7); `draw` is the k = 1 case with its own stream.

        Returns:
          (neighbour rows [B, k] int32, has [B, k] bool); a row with fewer than k valid
          positions fills the rest with itself and False.
        """
        rows = np.asarray(rows)
        valid = self.valid[rows]
        keys = np.where(valid, rng.random(valid.shape), 2.0)  # invalid positions sort last
        order = np.argsort(keys, axis=1, kind="stable")[:, :k]
        chosen = np.take_along_axis(self.windows[rows], order, axis=1)
        if order.shape[1] < k:  # windows narrower than k
            pad = np.repeat(rows[:, None], k - order.shape[1], axis=1)
            chosen = np.concatenate([chosen, pad], axis=1)
        has = np.arange(k)[None, :] < self.count[rows][:, None]
        return np.where(has, chosen, rows[:, None]).astype(np.int32), has

"""ConTra's neighbour negatives: clips of a clip's context window with another narration.

For clip i, the positions of its window (half-width max(m_video, m_text), as the public
code; `jaxsvr.inputs.windows`) whose clip's narration differs from clip i's.
`Neighbours.draw` picks one of them uniformly (repeated edge clips count once per
position, as in the public code) with a generator the caller seeds from (seed, epoch,
step), and says which clips have none (all their neighbours share their narration).
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

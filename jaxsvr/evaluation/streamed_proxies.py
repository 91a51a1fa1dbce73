"""Streamed evaluation under a caption proxy: BoW, PoS or SYN blocks with S = 1 on own pairs.

The set proxies (`jaxsvr.relevance.proxies`: bow, pos, syn) are weighted IoUs of class
sets built from parsed captions (`proxies.set_terms`), so `blocks.BlockRelevance`
computes their blocks as it does the EPIC class relevance's. The paper's relevance S
(Wray et al., CVPR 2021, Sec. 4) is 1 where the column caption is the row's own, the
proxy elsewhere; `OwnRelevance` lays those 1s over each block, in either direction, so
every entry equals the dense matrix's (`proxies.relevance` / `proxies.own_by_text` of the
proxy) bit for bit:

  tables = proxy_tables.read("bow", "clips.csv", "sentences.csv")
  rel = streamed_proxies.proxy_relevance("bow", tables)
  metrics = streamed.evaluate_embeddings(video, text, rel)

METEOR is no set proxy: it has no streamed form (its matrix: `python -m jaxsvr.relevance
proxy --proxy met`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from jaxsvr.evaluation import blocks
from jaxsvr.relevance import proxies
from jaxsvr.relevance.proxy_tables import Tables


class OwnRelevance:
    """Blocks of another relevance source with R = 1 at the given own pairs.

    Args:
      relevance: blocks in both directions, `shape` and `block(direction, start, stop)`
        (`blocks.BlockRelevance` of a set proxy's `proxies.set_terms`).
      own_rows, own_cols: the own pairs (row own_rows[k], column own_cols[k]); repeats
        are harmless.

    Example:
      sets = blocks.BlockRelevance(proxies.set_terms("pos", rows, cols))
      rel = OwnRelevance(sets, *proxies.own_pairs_by_text(row_texts, col_texts))
      r = rel.block(0, 0, 8)  # [8, n_columns]: rows 0..7 against every column
      r = rel.block(1, 0, 8)  # [8, n_rows]: columns 0..7 against every row
    """

    def __init__(
        self, relevance: blocks.BlockRelevance, own_rows: Sequence[int], own_cols: Sequence[int]
    ):
        self.relevance = relevance
        self.shape = tuple(relevance.shape)  # (rows, columns): (n_videos, n_texts)
        rows, cols = (np.asarray(x, np.int64).reshape(-1) for x in (own_rows, own_cols))
        if rows.size != cols.size:
            raise ValueError(f"{rows.size} own rows but {cols.size} own columns")
        for name, x, n in (("row", rows, self.shape[0]), ("column", cols, self.shape[1])):
            if x.size and not (0 <= x.min() and x.max() < n):
                raise ValueError(f"own {name} indices must be in [0, {n})")
        # per direction: the pairs as (query, item), sorted by query for a block's slice
        self._own = []
        for queries, items in ((rows, cols), (cols, rows)):
            order = np.argsort(queries, kind="stable")
            self._own.append((queries[order], items[order]))

    def block(self, direction: int, start: int, stop: int) -> np.ndarray:
        """[stop - start, n_items] float32 relevance of queries start..stop - 1 of
        `direction` (0: rows against columns, 1: columns against rows)."""
        out = self.relevance.block(direction, start, stop)
        if out.base is not None:  # a view (of a materialised relevance): never write into it
            out = out.copy()
        queries, items = self._own[direction]
        lo, hi = np.searchsorted(queries, (start, stop))
        out[queries[lo:hi] - start, items[lo:hi]] = 1.0
        return out


def proxy_relevance(
    name: str,
    tables: Tables,
    *,
    weights: tuple[float, float] = proxies.DEFAULT_WEIGHTS,
    rho: float = proxies.DEFAULT_RHO,
    own: bool = True,
) -> OwnRelevance:
    """The streamed relevance of the set proxy `name` between the tables' rows (videos,
    with `tables.groups`) and columns, as `python -m jaxsvr.relevance proxy` writes it.

    Args:
      name: one of `proxies.SET_NAMES`.
      tables: parsed caption tables (`proxy_tables.read`).
      weights, rho: as in `proxies.compute`.
      own: S = 1 on own pairs: with column captions where a column has the text of a
        row's caption (`proxies.own_by_text`, the command's `--own`), else where caption
        j is row j's or its video's (`proxies.relevance`); False: the proxy everywhere.

    Raises:
      InputError: `name` is not a set proxy.
    """
    terms = proxies.set_terms(
        name,
        tables.rows,
        tables.cols,
        classes=tables.classes,
        weights=weights,
        row_groups=tables.groups,
        rho=rho,
    )
    pairs = (np.zeros(0, np.int64), np.zeros(0, np.int64))
    if own and tables.cols is not None:
        pairs = proxies.own_pairs_by_text(tables.row_texts, tables.col_texts, tables.groups)
    elif own:
        n = len(tables.rows)
        pairs = (np.arange(n) if tables.groups is None else np.asarray(tables.groups), np.arange(n))
    return OwnRelevance(blocks.BlockRelevance(terms), *pairs)

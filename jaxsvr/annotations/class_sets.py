"""Ragged sets of integer class ids (CSR), the input of class relevance.

A clip or caption carries one set per part of speech: its verb classes and its noun
classes. `ClassSets` stores n such sets as `indptr` [n + 1] and `indices` [nnz] (sorted,
unique within a set), which keeps 67k EPIC clips in a few hundred kB and makes the set
operations below vectorised NumPy:

- `unique()` factorises the sets (relevance only depends on the set, and EPIC's 9668 test
  clips hold 905 distinct noun sets, so IoU tables are built over distinct sets only);
- `aggregate(groups, rho)` turns the caption sets of multi-caption videos into one set per
  video: the classes present in at least a fraction `rho` of that video's captions.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

import numpy as np


@dataclasses.dataclass(frozen=True, eq=False)
class ClassSets:
    """n sets of non-negative class ids in CSR form.

    Attributes:
      indptr: [n + 1] int64; set i is indices[indptr[i]:indptr[i + 1]].
      indices: [nnz] int32 class ids, sorted and unique within each set.
    """

    indptr: np.ndarray
    indices: np.ndarray

    def __post_init__(self):
        if self.indptr.ndim != 1 or self.indptr.size == 0 or self.indptr[0] != 0:
            raise ValueError("indptr must be a 1-D array starting at 0")
        if self.indptr[-1] != self.indices.size or np.any(np.diff(self.indptr) < 0):
            raise ValueError("indptr must be non-decreasing and end at len(indices)")
        if self.indices.size and self.indices.min() < 0:
            raise ValueError("class ids must be non-negative")

    @classmethod
    def from_lists(cls, sets: Iterable[Iterable[int]]) -> ClassSets:
        """Builds sets from iterables of ints; duplicates are dropped, order is irrelevant."""
        sets = [sorted({int(c) for c in s}) for s in sets]
        indptr = np.zeros(len(sets) + 1, np.int64)
        np.cumsum([len(s) for s in sets], out=indptr[1:])
        indices = np.fromiter((c for s in sets for c in s), np.int32, count=int(indptr[-1]))
        return cls(indptr, indices)

    @classmethod
    def from_labels(cls, labels: Sequence[int] | np.ndarray) -> ClassSets:
        """One singleton set per label (e.g. EPIC's single verb class per clip)."""
        labels = np.asarray(labels, np.int32).reshape(-1)
        return cls(np.arange(labels.size + 1, dtype=np.int64), labels.copy())

    def __len__(self) -> int:
        return self.indptr.size - 1

    @property
    def sizes(self) -> np.ndarray:
        """[n] int64 number of classes in each set."""
        return np.diff(self.indptr)

    @property
    def rows(self) -> np.ndarray:
        """[nnz] int64 set index of every stored class id."""
        return np.repeat(np.arange(len(self)), self.sizes)

    def __getitem__(self, i: int) -> tuple[int, ...]:
        return tuple(self.indices[self.indptr[i] : self.indptr[i + 1]].tolist())

    def tolist(self) -> list[tuple[int, ...]]:
        return [self[i] for i in range(len(self))]

    def take(self, idx: Sequence[int] | np.ndarray) -> ClassSets:
        """The sets at positions `idx`, in that order."""
        idx = np.asarray(idx, np.int64).reshape(-1)
        sizes = self.sizes[idx]
        indptr = np.zeros(idx.size + 1, np.int64)
        np.cumsum(sizes, out=indptr[1:])
        # Position of every output element in self.indices: start of its set + offset.
        offsets = np.arange(indptr[-1]) - np.repeat(indptr[:-1], sizes)
        return ClassSets(indptr, self.indices[np.repeat(self.indptr[idx], sizes) + offsets])

    def unique(self) -> tuple[ClassSets, np.ndarray]:
        """Distinct sets and, for every set, the index of its distinct set.

        Returns:
          (distinct, inverse) with self[i] == distinct[inverse[i]]; distinct sets appear
          in order of first occurrence.
        """
        keys = [self.indices[a:b].tobytes() for a, b in zip(self.indptr[:-1], self.indptr[1:])]
        first: dict[bytes, int] = {}
        inverse = np.fromiter((first.setdefault(k, len(first)) for k in keys), np.int64, len(keys))
        _, firsts = np.unique(inverse, return_index=True)
        return self.take(firsts), inverse

    def aggregate(self, groups: Sequence[int] | np.ndarray, rho: float = 0.25) -> ClassSets:
        """One set per group: classes present in >= rho of the group's sets.

        Used for multi-caption videos (MSR-VTT: 20 captions per video): a video's class set
        keeps the classes that at least a fraction `rho` of its captions mention.

        Args:
          groups: [n] int group (video) index of every set, values in 0..n_groups-1.
          rho: fraction in (0, 1].

        Returns:
          ClassSets with max(groups) + 1 sets; a group without sets gets an empty set.
        """
        if not 0.0 < rho <= 1.0:
            raise ValueError(f"rho must be in (0, 1], got {rho}")
        groups = np.asarray(groups, np.int64).reshape(-1)
        if groups.size != len(self):
            raise ValueError(f"groups has {groups.size} entries for {len(self)} sets")
        n_groups = int(groups.max()) + 1 if groups.size else 0
        n_members = np.bincount(groups, minlength=n_groups)
        n_classes = int(self.indices.max()) + 1 if self.indices.size else 1
        pair = groups[self.rows] * n_classes + self.indices
        pairs, counts = np.unique(pair, return_counts=True)
        group, cls = np.divmod(pairs, n_classes)
        # counts / members >= rho, written to be exact for rho = k / members.
        keep = counts >= rho * n_members[group] - 1e-9
        group, cls = group[keep], cls[keep]
        indptr = np.zeros(n_groups + 1, np.int64)
        np.cumsum(np.bincount(group, minlength=n_groups), out=indptr[1:])
        return ClassSets(indptr, cls.astype(np.int32))

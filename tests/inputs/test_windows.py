"""ConTra context windows (video edges, m = 0, narration order) and neighbour negatives
(uniform over the window positions with another narration, masking, determinism)."""

import numpy as np
import pytest

from jaxsvr.annotations.class_sets import ClassSets
from jaxsvr.annotations.epic100 import Clips, text_ids
from jaxsvr.errors import InputError
from jaxsvr.inputs.windows import context_windows
from jaxsvr.sampling.neighbours import Neighbours


def clips(video_ids, narration_ids, narrations=None) -> Clips:
    n = len(video_ids)
    narrations = narrations or [f"caption {k}" for k in range(n)]
    labels = ClassSets.from_labels(np.zeros(n, np.int64))
    zeros = np.zeros(n)
    return Clips(
        list(narration_ids), list(video_ids), list(narrations), zeros, zeros,
        ["v"] * n, [("n",)] * n, labels, labels,
    )  # fmt: skip


# two videos interleaved and out of narration order in the table:
# P01_01 clips (narration index): rows 2 (0), 0 (1), 4 (2); P01_02: rows 3 (0), 1 (1)
TABLE = clips(
    ["P01_01", "P01_02", "P01_01", "P01_02", "P01_01"],
    ["P01_01_1", "P01_02_1", "P01_01_0", "P01_02_0", "P01_01_2"],
)


def test_windows_follow_narration_order_and_repeat_edges():
    w = context_windows(TABLE, 2)
    assert w.shape == (5, 5) and w.dtype == np.int32
    np.testing.assert_array_equal(w[:, 2], np.arange(5))  # the centre is the clip itself
    np.testing.assert_array_equal(w[2], [2, 2, 2, 0, 4])  # first clip of P01_01
    np.testing.assert_array_equal(w[0], [2, 2, 0, 4, 4])
    np.testing.assert_array_equal(w[4], [2, 0, 4, 4, 4])  # last clip
    np.testing.assert_array_equal(w[3], [3, 3, 3, 1, 1])  # never crosses into another video
    np.testing.assert_array_equal(w[1], [3, 3, 1, 1, 1])


def test_window_of_half_width_zero_is_the_clip_and_errors():
    np.testing.assert_array_equal(context_windows(TABLE, 0), np.arange(5)[:, None])
    one = clips(["V"], ["V_0"])
    np.testing.assert_array_equal(context_windows(one, 3), np.zeros((1, 7)))
    with pytest.raises(InputError, match=">= 0"):
        context_windows(TABLE, -1)


def test_text_ids():
    ids = text_ids(["cut onion", "wash pan", "cut onion"])
    assert ids[0] == ids[2] != ids[1]


def test_neighbours_have_another_narration_from_the_window():
    # one video of 6 clips; clips 0-2 share a narration, so clip 1 (m = 1) has none
    names = ["open", "open", "open", "cut", "wash", "peel"]
    table = clips(["V"] * 6, [f"V_{k}" for k in range(6)], names)
    windows = context_windows(table, 1)
    nb = Neighbours(table.narration, windows)
    np.testing.assert_array_equal(nb.count, [0, 0, 1, 2, 2, 1])
    rows = np.repeat(np.arange(6), 200)
    chosen, has = nb.draw(rows, np.random.default_rng(0))
    assert chosen.dtype == np.int32 and has.dtype == bool
    np.testing.assert_array_equal(has, np.repeat([False, False, True, True, True, True], 200))
    np.testing.assert_array_equal(chosen[~has], rows[~has])  # themselves, masked out
    for row, got in zip(rows[has], chosen[has]):
        assert got in windows[row] and names[got] != names[row]
    # clip 4's two valid positions (clips 3 and 5) are drawn about equally often
    four = chosen[rows == 4]
    assert set(four) == {3, 5} and 60 < np.sum(four == 3) < 140


def test_repeated_edge_clips_count_once_per_position():
    names = ["a", "b"]
    table = clips(["V", "V"], ["V_0", "V_1"], names)
    nb = Neighbours(table.narration, context_windows(table, 2))  # [0, 0, 0, 1, 1], [0, 0, 1, 1, 1]
    np.testing.assert_array_equal(nb.count, [2, 2])
    chosen, has = nb.draw(np.array([0, 1]), np.random.default_rng(0))
    np.testing.assert_array_equal(chosen, [1, 0])
    assert has.all()


def test_draw_is_a_pure_function_of_the_generator():
    nb = Neighbours(TABLE.narration, context_windows(TABLE, 2))
    rows = np.array([0, 1, 2, 3, 4, 4])
    a = nb.draw(rows, np.random.default_rng([1, 2, 3]))
    b = nb.draw(rows, np.random.default_rng([1, 2, 3]))
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])


def test_k_neighbours_at_distinct_valid_positions():
    names = ["open", "open", "open", "cut", "wash", "peel"]
    table = clips(["V"] * 6, [f"V_{k}" for k in range(6)], names)
    windows = context_windows(table, 2)  # 5 positions per clip
    nb = Neighbours(table.narration, windows)
    rows = np.repeat(np.arange(6), 100)
    chosen, has = nb.draw_many(rows, np.random.default_rng(0), 3)
    assert chosen.shape == has.shape == (600, 3) and chosen.dtype == np.int32
    np.testing.assert_array_equal(has.sum(axis=1), np.minimum(nb.count[rows], 3))
    for row, got, ok in zip(rows, chosen, has):
        assert all(g == row for g in got[~ok])  # missing ones: the clip itself
        picked = got[ok]
        assert all(names[g] != names[row] and g in windows[row] for g in picked)
    # distinct positions: clip 3's window [1, 2, 3, 4, 5] has 4 valid positions (1, 2, 4, 5)
    three = chosen[rows == 3]
    assert all(len(set(r)) == 3 for r in three)
    counts = np.bincount(three.ravel(), minlength=6)[[1, 2, 4, 5]]
    assert counts.sum() == 300 and counts.min() > 50  # each position drawn about 3/4 of the time
    # wider than the window: the rest are the clip itself, masked
    chosen, has = nb.draw_many(np.array([4]), np.random.default_rng(1), 7)
    assert has.sum() == nb.count[4] and chosen.shape == (1, 7)

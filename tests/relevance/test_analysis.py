"""Proxy analyses: relevant-caption counts per threshold and per-video correlations."""

import numpy as np
import pytest

from jaxsvr.relevance import analysis


def test_relevant_counts_against_loop():
    rng = np.random.default_rng(0)
    rel = rng.random((7, 30)).astype(np.float32)
    rel[0] = 0.5  # ties at the threshold count as relevant (>=)
    t = np.linspace(0, 1, 11)
    want = [np.mean([(row >= x).sum() for row in rel.astype(np.float64)]) for x in t]
    np.testing.assert_allclose(analysis.relevant_counts(rel, t), want)
    assert analysis.relevant_counts(rel, [0.0])[0] == 30


def test_row_correlation_and_table():
    rng = np.random.default_rng(1)
    a = rng.random((5, 20))
    b = 2 * a + 1
    c = rng.random((5, 20))
    c[2] = 0.3  # constant row: undefined
    np.testing.assert_allclose(analysis.row_correlation(a, b), 1.0)
    r = analysis.row_correlation(a, c)
    assert np.isnan(r[2])
    np.testing.assert_allclose(r[0], np.corrcoef(a[0], c[0])[0, 1])
    names, table = analysis.correlation_table({"bow": a, "pos": b, "met": c})
    assert names == ["bow", "pos", "met"]
    np.testing.assert_allclose(np.diag(table), 1.0)
    assert table[0, 1] == pytest.approx(1.0)
    assert table[0, 2] == pytest.approx(np.nanmean(r)) and table[2, 0] == table[0, 2]


def test_plot_helper(tmp_path):
    plt = pytest.importorskip("matplotlib.pyplot")
    t = np.linspace(0, 1, 5)
    ax = analysis.plot_relevant_counts({"bow": np.arange(5, 0, -1)}, t)
    ax.figure.savefig(tmp_path / "counts.png")
    assert (tmp_path / "counts.png").stat().st_size > 0
    plt.close(ax.figure)

"""Every loss with every model: batch losses (online mining) and triplets across MME,
JPoSE, HGR and heads; similarity export for ensembles; objective errors."""

import numpy as np
import pytest
from train_runs import config, train_losses

from jaxsvr import train
from jaxsvr.errors import InputError
from jaxsvr.evaluation import evaluate

ONE = dict(train__num_epochs=1, eval__every_epochs=1)


def test_hgr_with_ranp_trains_and_exports_its_similarity(tmp_path):
    c = config("epic_hgr", "ranp,runlocal", eval__export_similarity=True, **ONE)
    m = train.train_and_evaluate(c, tmp_path)
    assert m["step"] == 7 and 0 < m["ndcg_avg"] <= 1
    assert {"train/action_ranp", "train/loss"} <= set(_rows(tmp_path)[0])
    sim, rel = np.load(tmp_path / "test_similarity.npy"), np.load(tmp_path / "test_relevance.npy")
    assert sim.shape == rel.shape and rel.shape[0] == 60 and sim.dtype == np.float32
    assert evaluate(sim, rel)["ndcg_avg"] == pytest.approx(m["ndcg_avg"], abs=1e-9)


@pytest.mark.parametrize(
    "name, arg, overrides",
    [
        ("epic_jpose", "runlocal", dict(loss__name="ranp")),
        ("epic_mme", "runlocal", dict(loss__name="multi_similarity")),
        ("epic_sms", "runlocal", dict(loss__name="triplet", loss__margin="relevance")),
        ("epic_sms", "sms,runlocal", {}),
        (
            "epic_hgr",
            "runlocal",
            dict(loss__name="triplet", loss__pair_weights__tt=0.0, loss__pair_weights__vv=0.0),
        ),
    ],
)
def test_model_and_loss_combinations(tmp_path, name, arg, overrides):
    m = train.train_and_evaluate(config(name, arg, **overrides, **ONE), tmp_path)
    assert m["step"] == 7 and 0 < m["ndcg_avg"] <= 1
    losses = train_losses(tmp_path)
    assert losses and all(np.isfinite(v) for v in losses.values())


def test_jpose_batch_loss_terms_per_level(tmp_path):
    train.train_and_evaluate(config(loss__name="max_margin", **ONE), tmp_path)
    row = _rows(tmp_path)[0]
    assert {"train/verb_max_margin", "train/noun_max_margin", "train/action_max_margin"} <= set(row)


def test_host_gather_matches_device_gather_for_a_batch_loss(tmp_path):
    c = dict(train__num_epochs=2, eval__every_epochs=2)
    train.train_and_evaluate(config("epic_sms", "sms,runlocal", **c), tmp_path / "d")
    train.train_and_evaluate(
        config("epic_sms", "sms,runlocal", train__gather="host", **c), tmp_path / "h"
    )
    a, b = train_losses(tmp_path / "d"), train_losses(tmp_path / "h")
    np.testing.assert_allclose(list(b.values()), list(a.values()), rtol=1e-6)


@pytest.mark.parametrize(
    "name, arg, overrides, match",
    [
        ("epic_hgr", "runlocal", dict(loss__name="triplet"), "pair_weights"),
        ("epic_jpose", "runlocal", dict(loss__name="arcface"), "loss.name"),
        (
            "epic_mme",
            "runlocal",
            dict(loss__name="ran", loss__level_weights__action=0.0),
            "weight 0",
        ),
        ("epic_sms", "runlocal", dict(data__word_vectors="/nonexistent.txt"), "word"),
    ],
)
def test_objective_errors(tmp_path, name, arg, overrides, match):
    with pytest.raises((InputError, FileNotFoundError), match=match):
        train.train_and_evaluate(config(name, arg, **overrides, **ONE), tmp_path)


def _rows(workdir):
    from train_runs import jsonl

    return [r for r in jsonl(workdir) if "train/loss" in r]

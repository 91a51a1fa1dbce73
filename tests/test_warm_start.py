"""`config.train.init_from`: a run starts from another run's parameters (the SMS paper's
ensemble recipe), with a fresh optimizer state; another model's parameters are refused."""

import pytest
from train_runs import config

from jaxsvr import train
from jaxsvr.errors import InputError


@pytest.fixture(scope="module")
def source_run(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("source")
    return workdir, train.train_and_evaluate(config(), workdir)


@pytest.mark.parametrize("where", ["workdir", "step folder"])
def test_a_run_starts_from_the_other_runs_parameters(source_run, tmp_path, where):
    source, done = source_run
    init_from = source if where == "workdir" else source / "checkpoints" / "28"
    # learning rate ~0: one step leaves the parameters as loaded, so the test metrics are
    # the source run's final ones (its best/ is its final state, step 28)
    c = config(train__init_from=str(init_from), train__max_steps=1, optimizer__lr=1e-30, seed=7)
    out = train.train_and_evaluate(c, tmp_path)
    assert out["ndcg_avg"] == done["ndcg_avg"] and out["map_avg"] == done["map_avg"]
    scratch = train.train_and_evaluate(
        config(train__max_steps=1, optimizer__lr=1e-30, seed=7), tmp_path / "scratch"
    )
    assert scratch["ndcg_avg"] != done["ndcg_avg"]


@pytest.mark.parametrize(
    "name, init_from, says",
    [
        ("epic_mme", "SOURCE", "holds another model's parameters"),
        ("epic_jpose", "NOWHERE", "neither a run's workdir"),
    ],
)
def test_bad_init_from_is_one_error_before_anything_is_written(
    source_run, tmp_path, name, init_from, says
):
    path = source_run[0] if init_from == "SOURCE" else tmp_path / "nowhere"
    with pytest.raises(InputError, match=says):
        train.train_and_evaluate(config(name, train__init_from=str(path)), tmp_path / "run")
    assert not (tmp_path / "run").exists() or not any((tmp_path / "run").iterdir())


def test_sms_ensemble_member_recipe_and_the_row_without_relax(tmp_path):
    """The SMS report's switches on the built-in data: a member trained with warm-up +
    cosine to a floor from another run's parameters, and SMS with relax 0."""
    import math

    first = train.train_and_evaluate(config("epic_sms", "runlocal"), tmp_path / "first")
    c = config("epic_sms", "recipe,norelax,runlocal", train__init_from=str(tmp_path / "first"))
    assert c.loss.sms.relax == 0.0 and c.optimizer.schedule == "warmup_cosine"
    member = train.train_and_evaluate(c, tmp_path / "member")
    assert math.isfinite(member["ndcg_avg"]) and member["ndcg_avg"] != first["ndcg_avg"]

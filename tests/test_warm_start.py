"""`config.train.init_from`: a run starts from another run's parameters (the SMS paper's
ensemble recipe), with a fresh optimizer state; another model's parameters are refused."""

import pytest
from train_runs import config

from jaxsvr.errors import InputError
from jaxsvr.train import loop


@pytest.fixture(scope="module")
def source_run(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("source")
    return workdir, loop.train_and_evaluate(config(), workdir)


@pytest.mark.parametrize("where", ["workdir", "step folder"])
def test_a_run_starts_from_the_other_runs_parameters(source_run, tmp_path, where):
    source, done = source_run
    init_from = source if where == "workdir" else source / "checkpoints" / "28"
    # learning rate ~0: one step leaves the parameters as loaded, so the test metrics are
    # the source run's final ones (its best/ is its final state, step 28)
    c = config(train__init_from=str(init_from), train__max_steps=1, optimizer__lr=1e-30, seed=7)
    out = loop.train_and_evaluate(c, tmp_path)
    assert out["ndcg_avg"] == done["ndcg_avg"] and out["map_avg"] == done["map_avg"]
    scratch = loop.train_and_evaluate(
        config(train__max_steps=1, optimizer__lr=1e-30, seed=7), tmp_path / "scratch"
    )
    assert scratch["ndcg_avg"] != done["ndcg_avg"]


def _empty_run(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "config.json").write_text("{}")
    return tmp_path / "empty"


def _damaged_step(tmp_path):
    (tmp_path / "other" / "checkpoints" / "5" / "default").mkdir(parents=True)
    (tmp_path / "other" / "checkpoints" / "5" / "default" / "_METADATA").write_text("torn")
    return tmp_path / "other" / "checkpoints" / "5"


@pytest.mark.parametrize(
    "name, init_from, says",
    [
        (
            "epic_mme",
            lambda source, tmp: source,
            "config.train.init_from: checkpoint {source}/best/28 holds another model's "
            "parameters than this config builds (params/",
        ),
        ("epic_jpose", lambda source, tmp: tmp / "nowhere", "neither a run's workdir"),
        (
            "epic_jpose",
            lambda source, tmp: _empty_run(tmp),
            "{tmp}/empty has no checkpoint (no step in best/ or checkpoints/): train the run "
            "first, or pick another config.train.init_from",
        ),
        (
            "epic_jpose",
            lambda source, tmp: _damaged_step(tmp),
            "cannot read checkpoint {tmp}/other/checkpoints/5 (",
        ),
    ],
    ids=["another model", "nowhere", "no checkpoint", "damaged checkpoint"],
)
def test_bad_init_from_is_one_error_before_anything_is_written(
    source_run, tmp_path, name, init_from, says
):
    path = init_from(source_run[0], tmp_path)
    with pytest.raises(InputError) as e:
        loop.train_and_evaluate(config(name, train__init_from=str(path)), tmp_path / "run")
    message = str(e.value)
    assert says.format(source=source_run[0], tmp=tmp_path) in message, message
    assert "config.train.init_from" in message and "--checkpoint" not in message, message
    assert "  " not in message, message
    assert not (tmp_path / "run").exists() or not any((tmp_path / "run").iterdir())


def test_sms_ensemble_member_recipe_and_the_row_without_relax(tmp_path):
    """The SMS report's switches on the built-in data: a member trained with warm-up +
    cosine to a floor from another run's parameters, and SMS with relax 0."""
    import math

    first = loop.train_and_evaluate(config("epic_sms", "runlocal"), tmp_path / "first")
    c = config("epic_sms", "recipe,norelax,runlocal", train__init_from=str(tmp_path / "first"))
    assert c.loss.sms.relax == 0.0 and c.optimizer.schedule == "warmup_cosine"
    member = loop.train_and_evaluate(c, tmp_path / "member")
    assert math.isfinite(member["ndcg_avg"]) and member["ndcg_avg"] != first["ndcg_avg"]

"""`config.matmul_precision`: the scope it opens, one-line errors for unknown names, and a
short training run under "bfloat16" (mixed precision) against float32."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from train_runs import config, train_losses

from jaxsvr import configs
from jaxsvr.errors import InputError
from jaxsvr.runs import gallery
from jaxsvr.runs.trained_run import TrainedRun
from jaxsvr.runtime import precision
from jaxsvr.train import checks, loop


@pytest.mark.parametrize("name", ["default", "highest", "high", "tensorfloat32", "bfloat16"])
def test_scope_sets_the_jax_default_and_restores_it(name):
    before = jax.config.jax_default_matmul_precision
    with precision.scope(name):
        want = before if name == "default" else name  # "default" leaves JAX's setting
        assert jax.config.jax_default_matmul_precision == want
    assert jax.config.jax_default_matmul_precision == before


def test_unknown_name_is_an_input_error_naming_the_key():
    c = configs.base()
    c.matmul_precision = "fast"
    with pytest.raises(InputError, match="config.matmul_precision 'fast'"):
        checks.check_train(c)


@pytest.mark.parametrize("name, want", [("highest", "HIGHEST"), ("default", "DEFAULT")])
def test_programs_traced_in_the_scope_carry_its_precision(name, want):
    """Checked on the lowered program, so it holds on CPUs, where every precision computes
    float32 (conftest pins "highest" for the session: reset it first)."""
    a = np.ones((4, 8), np.float32)
    with jax.default_matmul_precision(None), precision.scope(name):
        text = jax.jit(jnp.matmul).lower(a, a.T).as_text()
    assert f"precision = [{want}, {want}]" in text


def test_bfloat16_trains_near_float32_and_differs(tmp_path):
    """A short JPoSE run under "bfloat16" (the Dense products round their inputs to
    bfloat16, `jaxsvr.models.dense`; the rest stays float32) against the same run at
    "highest": every logged loss within 0.5% of it (they differ by about 0.01%), and not
    equal (the setting took effect on a CPU, where XLA alone computes float32 whatever
    precision a float32 product asks for). The tools that re-embed a run (submit, rescore,
    retrieve: `jaxsvr.runs.gallery`) compute as it did, under its config's precision."""
    runs = {}
    for name in ("highest", "bfloat16"):
        c = config(
            train__max_steps=20,
            train__log_every_steps=5,
            matmul_precision=name,
            eval__export_similarity=True,
        )
        loop.train_and_evaluate(c, tmp_path / name)
        runs[name] = train_losses(tmp_path / name)
    assert sorted(runs["bfloat16"]) == sorted(runs["highest"]) == [5, 10, 15, 20]
    got, want = (np.array([runs[n][s] for s in (5, 10, 15, 20)]) for n in ("bfloat16", "highest"))
    np.testing.assert_allclose(got, want, rtol=5e-3)
    assert not np.array_equal(got, want)

    work = tmp_path / "bfloat16"
    exported = np.load(work / "test_similarity.npy")
    run = TrainedRun.load(work, "latest")
    np.testing.assert_array_equal(gallery.test_similarity(run)[0], exported)
    at_float32 = gallery.test_evaluator(run, *gallery.rebuild(run)).similarity(run.params)
    assert not np.array_equal(at_float32, exported)  # the tests' "highest" differs
    searcher = gallery.Retriever(run, gallery.Gallery.of(run))
    sentence = searcher.gallery.sentences["narration"][0]
    hits, _ = searcher.clips(sentence, top=len(exported))
    scores = np.empty(len(exported), np.float32)
    scores[[h.row for h in hits]] = [h.score for h in hits]
    np.testing.assert_allclose(scores, exported[:, 0], rtol=1e-5, atol=1e-6)

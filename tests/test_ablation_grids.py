"""The result and ablation grids of `benchmarks/train_results.py`: every row is a config the
trainer accepts, with the switch it names set, and rows of one grid never share a workdir
unless they are the same run."""

import pytest
import train_results as grids

from jaxsvr.train import checks

pytestmark = pytest.mark.filterwarnings("ignore:the load_module:DeprecationWarning")


class Args:
    annotations = ""
    epochs = 10
    eval_every = 0
    set = ()
    out = "/tmp/unused"


def _resolved(grid: str):
    args = Args()
    args.grid = grid
    for label, spec in grids.GRIDS[grid]:
        flags = grids.config_flags(spec, 0, args)
        flags = [f.replace("--config=", f"--config={grids.ROOT}/", 1) for f in flags]
        yield label, spec, grids.resolved_config(flags), args


@pytest.mark.parametrize(
    "grid",
    [
        "margin",
        "modalities",
        "terms",
        "ranp_margins",
        "contra_neighbours",
        "contra_aggregation",
        "contra_shared",
        "contra_losses",
        "sms",
    ],
)
def test_every_ablation_row_is_a_valid_distinct_config(grid):
    import ml_collections

    seen = {}
    for label, spec, config, args in _resolved(grid):
        checks.check_train(ml_collections.ConfigDict(config))
        seen.setdefault(grids.workdir_for(spec, 0, args, config).name, label)
    assert len(seen) == len(grids.GRIDS[grid])


def test_the_rows_set_their_switches():
    rows = {label: c for label, _, c, _ in _resolved("margin")}
    assert rows["JPoSE, fixed margin 0.25"]["loss"]["fixed_margin"] == 0.25
    assert rows["JPoSE, relevance margin"]["loss"]["margin"] == "relevance"
    rows = {label: c for label, _, c, _ in _resolved("terms")}
    cross = rows["JPoSE rel. margin, cross-modal action only"]["loss"]
    assert cross["pair_weights"] == {"tv": 2.0, "vt": 1.0, "tt": 0.0, "vv": 0.0}
    assert cross["level_weights"]["verb"] == cross["level_weights"]["noun"] == 0.0
    rows = {label: c for label, _, c, _ in _resolved("ranp_margins")}
    ranp = rows["HGR RANP, dn 0.2 dp 0.25"]["loss"]["ranp"]
    assert (ranp["margin_neg"], ranp["margin_pos"], ranp["tau"]) == (0.2, 0.25, 0.15)
    rows = {label: c for label, _, c, _ in _resolved("modalities")}
    assert rows["JPoSE rel. margin, rgb,flow"]["data"]["modalities"] == "rgb,flow"

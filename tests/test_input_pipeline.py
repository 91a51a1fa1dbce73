"""Each process's share of a global batch: the shares of N processes, in process order,
are the batch one process builds, for offline triplets (JPoSE) and a batch loss with
relevant-caption pairing (SMS), with the device and the host gather."""

import numpy as np
import pytest
from train_runs import config

from jaxsvr.train import batches, pipeline


@pytest.mark.parametrize("gather", ["device", "host"])
@pytest.mark.parametrize("name, arg", [("epic_jpose", "runlocal"), ("epic_sms", "sms,runlocal")])
def test_process_shares_make_the_one_process_batch(name, arg, gather):
    c = config(name, arg)
    run = pipeline.build(c)
    batch_size = c.train.batch_size
    steps = run.objective.steps_per_epoch(batch_size)

    def source(process):
        return batches.BatchSource(
            run.objective, run.train_inputs, batch_size, steps, gather, process=process
        )

    whole = source((0, 1))
    for count in (2, 4):
        shares = [source((i, count)) for i in range(count)]
        for step in (1, steps + 2):  # the first step, and one of the second epoch
            want = whole(step)
            got = [share(step) for share in shares]
            assert all(g.keys() == want.keys() for g in got)
            for key in want:
                np.testing.assert_array_equal(np.concatenate([g[key] for g in got]), want[key])
                assert len(got[0][key]) == batch_size // count

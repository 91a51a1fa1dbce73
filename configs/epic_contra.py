"""ConTra on EPIC-KITCHENS-100: clips (and optionally sentences) in their temporal context.

  python -m jaxsvr.main --config=configs/epic_contra.py --workdir=/tmp/contra \
      --config.data.annotations=../shared/data/epic100
  python -m jaxsvr.main --config=configs/epic_contra.py:context=both,m=2 --workdir=/tmp/c2

Variants: `context=clip|text|both|none` (default clip: the clip window, sentences alone),
`m=0..5` (the window half-width of every modality with context; default 4, the paper's
best on EPIC), `runlocal` (tiny, seconds; tests). `context=none` or `m=0` is the
no-context baseline (the same model with windows of one item).

Model and training as the paper / public code for EPIC: 512-d embeddings, clip-context
transformer with 2 layers and 8 heads (feed-forward 2048, dropout 0.3), the S3D-style
sentence model (300-d words -> 2048 -> max-pool -> 512), loss CML + NEI + UNI (weights 1,
temperature 0.07), Adam lr 1e-4 with a 1300-iteration linear warm-up (the paper's) then
linear decay to 0, batch 512 (`runlocal` keeps a warm-up over 10% of its few steps).
Evaluation: R@1/5/10, median rank and RSum of EPIC single-instance retrieval (the clips
narrated with each unique test sentence), and nDCG / mAP with the class relevance.

Published ("ConTra: (Con)text (Tra)nsformer for Cross-Modal Video Retrieval", Fragomeni
et al. ACCV 2022; EPIC-100, real features): RSum 70.6 for JPoSE -> 260.3 for ConTra with
clip context m = 4; m = 1 alone adds 23.2 RSum over no context.
"""

import ml_collections

from jaxsvr import configs

WARMUP_STEPS = 1300  # the paper's linear warm-up, in iterations (all three datasets)


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
    config = configs.contra(arg, m=4, layers=2, heads=8)
    if "runlocal" not in (arg or ""):  # runlocal's few steps keep a 10% warm-up
        config.optimizer.update(warmup_fraction=0.0, warmup_steps=WARMUP_STEPS)
    return config

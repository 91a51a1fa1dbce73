"""JPoSE on EPIC-KITCHENS-100: the main job of jaxsvr.

  python -m jaxsvr.main --config=configs/epic_jpose.py --workdir=/tmp/jpose
  python -m jaxsvr.main --config=configs/epic_jpose.py:margin=relevance --workdir=/tmp/jpose_rel \
      --config.data.annotations=../shared/data/epic100

Without `data.annotations` it trains on the built-in synthetic kitchen data (nothing is
downloaded); with it, on the EPIC-100 annotations (train: EPIC_100_uda_source_train.csv,
test: 9668 clips x 3842 sentences) with synthetic features, or real ones with
`--config.data.features=DIR`.

Targets (seed paper, "Relevance-based Margin for Contrastively-trained Video Retrieval
Models", real TBN features): JPoSE on EPIC-100 53.5 nDCG / 44.0 mAP with the fixed margin,
56.2 / 45.8 with the relevance margin. Published schedule: SGD lr 0.01, momentum 0.9,
batch 64 anchors, 100 epochs, 10 triplets per anchor resampled every 10 epochs.

Variants: `margin=fixed|relevance` (default fixed), `runlocal` (tiny, seconds; tests).
"""

import ml_collections

from jaxsvr import configs


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
    v = configs.variants(arg, {"margin": ("fixed", "relevance"), "runlocal": None})
    config = configs.base()
    configs.mme_jpose_model(config, "jpose")
    config.loss.margin = v.get("margin", "fixed")
    if "runlocal" in v:
        configs.runlocal(config)
    return config

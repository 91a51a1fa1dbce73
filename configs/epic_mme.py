"""MME (whole-caption joint embedding) on EPIC-KITCHENS-100, the JPoSE baseline.

  python -m jaxsvr.main --config=configs/epic_mme.py --workdir=/tmp/mme
  python -m jaxsvr.main --config=configs/epic_mme.py:margin=relevance --workdir=/tmp/mme_rel \
      --config.data.annotations=../shared/data/epic100

Published (EPIC-KITCHENS-100 multi-instance retrieval test, TBN RGB+Flow+Audio features):
MME 48.5 nDCG / 38.5 mAP with the fixed margin, 49.6 / 39.2 with the relevance margin
(`margin=relevance`; "Relevance-based Margin for Contrastively-trained Video Retrieval
Models", Falcon et al. ICMR 2022); JPoSE 53.5 / 44.0 (`configs/epic_jpose.py`). Same
schedule as JPoSE: SGD lr 0.01, momentum 0.9, batch 64 anchors, 100 epochs; triplets at the
caption (action) level only.

Variants: `margin=fixed|relevance` (default fixed), `runlocal` (tiny, seconds; tests).
"""

import ml_collections

from jaxsvr import configs


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
    v = configs.variants(arg, {"margin": ("fixed", "relevance"), "runlocal": None})
    config = configs.base()
    configs.mme_jpose_model(config, "mme")
    config.loss.margin = v.get("margin", "fixed")
    if "runlocal" in v:
        configs.runlocal(config)
    return config

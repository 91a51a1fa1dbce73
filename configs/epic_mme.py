"""MME (whole-caption joint embedding) on EPIC-KITCHENS-100, the JPoSE baseline.

  python -m jaxsvr.main --config=configs/epic_mme.py --workdir=/tmp/mme
  python -m jaxsvr.main --config=configs/epic_mme.py:margin=relevance --workdir=/tmp/mme_rel \
      --config.data.annotations=../shared/data/epic100

Reference (EPIC-KITCHENS-100 multi-instance retrieval baselines, real TBN features): the
MME-based MI-MM baseline reaches about 44.7 nDCG / 29.2 mAP, JPoSE 53.5 / 44.0. Same
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

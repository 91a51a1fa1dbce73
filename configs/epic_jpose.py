"""EPIC-KITCHENS-100 with JPoSE: the main job of jaxsvr.

  python -m jaxsvr.main --config=configs/epic_jpose.py --workdir=/tmp/jpose
  python -m jaxsvr.main --config=configs/epic_jpose.py --workdir=/tmp/jpose \
      --config.data.annotations=../shared/data/epic100

Target (seed paper, "Relevance-based Margin for Contrastively-trained Video Retrieval
Models"): JPoSE on EPIC-100, 53.5 -> 56.2 nDCG and 44.0 -> 45.8 mAP with the relevance
margin. The JPoSE trainer is not built yet: until it is, this config runs the evaluation
demo (`jaxsvr.eval_demo`): class relevance and every metric on reference similarities.

Variants (`--config=configs/epic_jpose.py:runlocal`): `runlocal` shrinks the data.
"""

import ml_collections


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
    variants = set((arg or "").split(",")) - {""}
    unknown = variants - {"runlocal"}
    if unknown:
        raise ValueError(f"unknown variant(s) {sorted(unknown)} of epic_jpose: use runlocal")
    config = ml_collections.ConfigDict()
    config.job = "eval_demo"
    config.seed = 0

    config.data = ml_collections.ConfigDict()
    config.data.annotations = ""  # EPIC annotation folder; "" = built-in synthetic kitchen data
    config.data.num_videos = 40
    config.data.clips_per_video = 60
    config.data.seed = 0

    config.eval = ml_collections.ConfigDict()
    config.eval.threshold = 1.0  # relevance of a positive for R@K / ranks
    config.eval.backend = "auto"  # numpy on CPU, jitted JAX on GPU/TPU
    config.eval.oracle_noise = (0.1, 0.3, 1.0)

    if "runlocal" in variants:
        config.data.num_videos = 4
        config.data.clips_per_video = 20
    return config

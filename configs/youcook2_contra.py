"""ConTra with YouCook2's settings: clip context m = 3, a 1-layer, 2-head transformer.

  python -m jaxsvr.main --config=configs/youcook2_contra.py --workdir=/tmp/yc2_contra
  python -m jaxsvr.main --config=configs/youcook2_contra.py --workdir=/tmp/yc2_contra \
      --config.data.annotations=youcookii_annotations_trainval.json

Variants as `configs/epic_contra.py`: `context=clip|text|both|none`, `m=0..5` (default
3, the paper's best on YouCook2), `runlocal`. Training as the paper: Adam 1e-4 with a
1300-iteration linear warm-up then linear decay to 0, batch 512 (`runlocal` keeps a
warm-up over 10% of its few steps).

Data: `config.data.format = "youcook2"`: the public YouCook2 annotation JSON
(`jaxsvr.annotations.youcook2`; recipe steps in time order are the clip sequence the windows
run over), or, with `data.annotations` empty, the built-in kitchen data in YouCook2 form.
Clips get classes from their captions (`data.syn_classes`) and synthetic features from
them. Published (Fragomeni et al. ACCV 2022, YouCook2 with S3D features): see the paper's
Table 2.
"""

import ml_collections

from jaxsvr import configs

WARMUP_STEPS = 1300  # the paper's linear warm-up, in iterations


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
    config = configs.contra(arg, m=3, layers=1, heads=2)
    config.data.format = "youcook2"
    if "runlocal" not in (arg or ""):  # runlocal's few steps keep a 10% warm-up
        config.optimizer.update(warmup_fraction=0.0, warmup_steps=WARMUP_STEPS)
    return config

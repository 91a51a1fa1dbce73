"""ConTra with YouCook2's settings: clip context m = 3, a 1-layer, 2-head transformer.

  python -m jaxsvr.main --config=configs/youcook2_contra.py --workdir=/tmp/yc2_contra
  python -m jaxsvr.main --config=configs/youcook2_contra.py --workdir=/tmp/yc2_contra \
      --config.data.annotations=youcookii_annotations_trainval.json

Variants as `configs/epic_contra.py`: `context=clip|text|both|none`, `m=0..5` (default
3, the paper's best on YouCook2), `runlocal`.

Data: `config.data.format = "youcook2"`: the public YouCook2 annotation JSON
(`jaxsvr.annotations.youcook2`; recipe steps in time order are the clip sequence the windows
run over), or, with `data.annotations` empty, the built-in kitchen data in YouCook2 form.
Clips get classes from their captions (`data.syn_classes`) and synthetic features from
them. Published (Fragomeni et al. ACCV 2022, YouCook2 with S3D features): see the paper's
Table 2.
"""

import ml_collections

from jaxsvr import configs


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
    config = configs.contra(arg, m=3, layers=1, heads=2)
    config.data.format = "youcook2"
    return config

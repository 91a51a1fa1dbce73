"""ConTra with YouCook2's settings: clip context m = 3, a 1-layer, 2-head transformer.

  python -m jaxsvr.main --config=configs/youcook2_contra.py --workdir=/tmp/yc2_contra

Variants as `configs/epic_contra.py`: `context=clip|text|both|none`, `m=0..5` (default
3, the paper's best on YouCook2), `runlocal`.

Data: the reader of the public YouCook2 annotation format (`youcookii_annotations_
trainval.json`) arrives with the semantic-proxy issue; until then this config trains on
the built-in synthetic kitchen data (videos as ordered clip sequences, as YouCook2's
recipe steps) or on EPIC-style CSVs given with `--config.data.annotations`. Published
(Fragomeni et al. ACCV 2022, YouCook2 with S3D features): see the paper's Table 2.
"""

import ml_collections

from jaxsvr import configs


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
    return configs.contra(arg, m=3, layers=1, heads=2)

"""`ContraObjective`: ConTra's loss (Fragomeni et al. ACCV 2022).

Cross-modal NCE + neighbouring loss + uniformity over (video, caption) pairs, the
neighbours drawn from each clip's temporal window (`jaxsvr.sampling.neighbours`); any
dot-product model, though only context models make the neighbouring term meaningful.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxsvr import losses
from jaxsvr.errors import InputError
from jaxsvr.inputs import windows
from jaxsvr.objectives.base import Gather, embed, model_inputs
from jaxsvr.sampling import neighbours
from jaxsvr.sampling import pairs as batches


class ContraObjective:
    """ConTra's loss: CML + NEI + UNI over (video, own caption) pairs with neighbours.

    Per batch of B anchor clips (epoch order as every objective): the cross-modal NCE of
    the [B, B] `action` scores (`losses.cross_modal_nce`); uniformity over the 2B unit
    embeddings (`losses.uniformity`, t = 2); and the neighbouring loss
    (`losses.neighbour_nce`): each clip's neighbour (a clip of its window with another
    narration, drawn per (seed, epoch, step)) is embedded with its own window and is the
    single negative of the text anchor against its video (when the model has video
    context) and of the video anchor against its caption (when it has text context).
    Clips without such a neighbour are masked out of that term. The public code pairs the
    video-side negatives (encoded for all B clips) with the masked subset of anchors by
    position, so after the first clip without a neighbour each anchor meets another
    clip's negative; here row k of every array belongs to clip k.

    With `config.sampler.neighbours` = K > 1 (the paper's Table 7) each clip draws K
    neighbours at distinct window positions and the neighbouring softmax runs over the
    positive and all of them.

    `config.loss.contra.mine_weight` > 0 adds a batch mining term, the max-margin hinge on
    each anchor's hardest in-batch negative (`losses.max_margin` with
    `config.loss.max_margin`'s margin and `hard`), as the paper's loss table compares.

    Config: weights `config.loss.contra.{cml,nei,uni}_weight`; one temperature for CML
    and NEI, `config.loss.cross_modal_nce.temperature` (0.07). Any dot-product model
    (unit `action` embeddings) works; only context models (`Model.windows`) get the
    neighbouring term. Only the neighbour inputs a term needs are gathered.
    """

    batch_keys = ("video_rows", "text_rows", "neighbour_rows", "has_neighbour")
    pairings = ("own",)  # each clip with its own caption

    def __init__(self, config, train_split, model, relevance=None):
        if not model.dot_product or "action" not in model.levels:
            raise InputError(
                f"loss contra needs unit 'action' embeddings scored by dot products; model "
                f"{config.model.name!r} has none: use contra, mme, jpose or heads"
            )
        c = config.loss.contra
        self.temperature = config.loss.cross_modal_nce.temperature
        self.weights = {"cml": c.cml_weight, "nei": c.nei_weight, "uni": c.uni_weight}
        if c.mine_weight > 0:  # a batch mining term beside CML (the paper's Table 6)
            self.weights["mine"] = c.mine_weight
            self.mining = dict(config.loss.max_margin)
        context = dict(getattr(model, "windows", {}))
        self.sides = tuple(
            side for side, key in (("video", "video"), ("text", "caption")) if context.get(key)
        )
        half = max([0, *context.values()])
        clips = train_split.clips
        self.neighbours = neighbours.Neighbours(
            clips.narration, windows.context_windows(clips, half)
        )
        self.n, self.seed = len(clips), config.seed
        self.k = config.sampler.neighbours  # neighbour negatives per clip (Table 7's K)
        self.gathers = {"video": Gather("video", "video_rows")}
        self.gathers.update({f: Gather(f, "text_rows") for f in model.text_fields})
        if "video" in self.sides:
            self.gathers["neighbour_video"] = Gather("video", "neighbour_rows")
        if "text" in self.sides:
            self.gathers.update(
                {f"neighbour_{f}": Gather(f, "neighbour_rows") for f in model.text_fields}
            )
        self.rows_per_anchor = 2 + self.k * len(self.sides)  # video, caption, neighbours

    def steps_per_epoch(self, batch_size: int) -> int:
        return batches.steps_per_epoch(self.n, batch_size)

    def host_batch(self, epoch: int, step: int, batch_size: int, share: slice = slice(None)):
        order = batches.epoch_order(self.seed, epoch, self.n)
        rows = order[step * batch_size : (step + 1) * batch_size]
        rng = np.random.default_rng([self.seed, epoch, step, 0x4E31])
        if self.k == 1:  # all rows: one draw per batch
            neighbour, has = self.neighbours.draw(rows, rng)
        else:  # [B, K]
            neighbour, has = self.neighbours.draw_many(rows, rng, self.k)
        rows = rows.astype(np.int32)[share]
        return {
            "video_rows": rows,
            "text_rows": rows,
            "neighbour_rows": neighbour[share],
            "has_neighbour": has[share],
        }

    def loss(self, model, params, inputs: dict, batch: dict, rng):
        rng, video_rng, text_rng = jax.random.split(rng, 3)
        video, text = embed(model, params, model_inputs(model, inputs), rng)
        v, t = video["action"], text["action"]
        terms = {
            "cml": losses.cross_modal_nce(v @ t.T, temperature=self.temperature),
            "uni": losses.uniformity(jnp.concatenate([v, t]), t=2.0),
            "nei": jnp.zeros((), v.dtype),
        }
        if "mine" in self.weights:  # VSE++ hinge on the hardest negatives of the batch
            terms["mine"] = losses.max_margin(v @ t.T, **self.mining)
        mask, kw = batch["has_neighbour"], dict(temperature=self.temperature)
        shape = mask.shape  # [B] or [B, K]: the neighbours' embeddings come back so
        if "video" in self.sides:  # the caption's own clip against the neighbour clip
            x = {"video": inputs["neighbour_video"]}
            nv = model.apply(params, x, True, method=model.embed_video, rngs={"dropout": video_rng})
            nv = nv["action"].reshape(*shape, -1)
            terms["nei"] += losses.neighbour_nce(t, v, nv, mask, **kw)
        if "text" in self.sides:  # the clip's own caption against the neighbour's
            x = {f: inputs[f"neighbour_{f}"] for f in model.text_fields}
            nt = model.apply(params, x, True, method=model.embed_text, rngs={"dropout": text_rng})
            nt = nt["action"].reshape(*shape, -1)
            terms["nei"] += losses.neighbour_nce(v, t, nt, mask, **kw)
        total = sum(self.weights[k] * terms[k] for k in terms)
        return total, terms

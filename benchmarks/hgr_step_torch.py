"""Time of one HGR training step in PyTorch (CPU, float32) on random data.

The step follows the public HGR training code as the RANP code trains it on EPIC-100
(repository aranciokov/ranp, which takes its layers from cshizhe/hgr_v2t):
`framework/modelbase.py` `train_one_batch` (zero_grad, forward_loss, backward, Adam step)
with `t2vretrieval/models/mlmatch.py` `HPRoleGraphMatchModel.forward_loss` and the
settings of `t2vretrieval/driver/configs/prepare_mlmatch_configs_EK100_TBN_thrPos_hardPos.py`:
batch 64, 3072-d TBN segment features (at most 20), 1024-d embeddings, 300-d words, one
bidirectional GRU layer of 1024, 4 verb and 6 noun nodes, 16 semantic roles, one
attention-GCN layer, attended-cosine phrase scores (attn_fusion 'embed', sigma 4), the
hard-positive contrastive loss (margin 0.2, margin_pos 0.2, max_violation, both
directions), Adam lr 1e-4, dropout 0.2 (GCN 0.5).

Forward, as the public code computes it:
- video (`encoders/mlvideo.py`): three Linear(3072, 1024) over [B, S, 3072] with dropout;
  a Linear(1024, 1) attention over the sentence level's segments pools the sentence vector.
- text (`encoders/sentence.py`, `mlsent.py`, `graph.py`): word table -> dropout -> the
  captions sorted by length, packed, through nn.GRU (bidirectional), unpacked, unsorted,
  directions averaged; attention pooling gives the sentence node; verb / noun nodes are
  max-pools over their word spans times a role embedding; one attention-GCN layer
  (query/key Linear(1024, 512), softmax over the row-normalised edges, Linear(1024, 1024)
  context, residual + dropout + LayerNorm).
- scores (`mlmatch.py` `generate_scores`): the sentence cosine, and per verb / noun node
  the cosine with an attention-weighted sum of segments, formed for every (video, text,
  node) as a [B, B, P, 1024] tensor; their mean is the fused score.
- loss (`criterion.py` `ContrastiveLossHP`) on the sentence, verb, noun and fused scores
  with the batch relevance (threshold 0.4); the fused terms are the loss.

The collate function of the public reader trims a batch to its longest caption and its
longest video, and the GRU runs over the packed (valid) tokens only: caption lengths and
node counts are drawn per row from `--caption-stats` (histograms; the benchmark passes
jaxsvr's train split's), else uniformly. The batch relevance matrices (computed in Python
by the public `forward_loss`) are drawn before the timer starts, like the data loader's
work.

Run by benchmarks/hgr_step_speed.py in its own process (torch and JAX never share one):

  python benchmarks/hgr_step_torch.py [--threads 2] [--steps 10] [--warmup 3] [--seed 0]
      [--segments 8] [--words 16] [--vocab 899] [--caption-stats STATS.json]

The last stdout line is one JSON object: framework, version, threads, ms_per_step (each
timed step), median_ms, and parts_ms (median ms of the forward's video, text and
scores + loss parts, the backward pass and the optimiser step). Imports only torch,
the standard library and `benchmarks/torch_reference.py`.
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import dataclass

import torch
import torch_reference  # beside this script
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

NUM_ROWS = 16115  # rows of the feature and caption tables (EPIC-100 train)
BATCH = 64
VIDEO_DIM = 3072
EMBED = 1024  # dim_embed = rnn_hidden_size
WORD_DIM = 300
NUM_VERBS, NUM_NOUNS = 4, 6
NUM_ROLES = 16  # len(ROLES) of the public reader
DROPOUT, GCN_DROPOUT = 0.2, 0.5
SIGMA = 4.0  # simattn_sigma
MARGIN, MARGIN_POS = 0.2, 0.2
THRESHOLD_POS = 0.4
LEARNING_RATE = 1e-4
NEG = -1e18  # the public code's fill for masked logits


@dataclass
class Tables:
    """What a step reads rows of: segment features and each caption's graph inputs."""

    video: torch.Tensor  # [NUM_ROWS, S, 3072] float32
    ids: torch.Tensor  # [NUM_ROWS, L] int64, 0 after the caption
    lengths: torch.Tensor  # [NUM_ROWS] int64, >= 1
    verb_masks: torch.Tensor  # [NUM_ROWS, 4, L] bool
    noun_masks: torch.Tensor  # [NUM_ROWS, 6, L] bool
    roles: torch.Tensor  # [NUM_ROWS, 10] int64
    edges: torch.Tensor  # [NUM_ROWS, 11, 11] float32, row-normalised, target x source


class VideoEncoder(nn.Module):
    """Three level projections; attention pooling of the first gives the sentence vector."""

    def __init__(self) -> None:
        super().__init__()
        self.levels = nn.ModuleList([nn.Linear(VIDEO_DIM, EMBED) for _ in range(3)])
        self.attn = nn.Linear(EMBED, 1)
        self.drop = nn.Dropout(DROPOUT)

    def forward(self, fts: torch.Tensor, lens: torch.Tensor):
        sent, verb, noun = (self.drop(level(fts)) for level in self.levels)
        pad = torch.arange(fts.size(1)).unsqueeze(0) >= lens.unsqueeze(1)  # [B, S]
        weights = torch.softmax(self.attn(sent).squeeze(2).masked_fill(pad, NEG), dim=1)
        return (sent * weights.unsqueeze(2)).sum(1), verb, noun


class AttnGCN(nn.Module):
    """One attention-GCN layer: attention restricted to the edges, context, LayerNorm."""

    def __init__(self) -> None:
        super().__init__()
        self.query = nn.Linear(EMBED, EMBED // 2)
        self.key = nn.Linear(EMBED, EMBED // 2)
        self.ctx = nn.Linear(EMBED, EMBED, bias=False)
        self.norm = nn.LayerNorm(EMBED)
        self.drop = nn.Dropout(GCN_DROPOUT)

    def forward(self, nodes: torch.Tensor, edges: torch.Tensor) -> torch.Tensor:
        logits = self.query(nodes) @ self.key(nodes).transpose(1, 2) / math.sqrt(EMBED // 2)
        off = edges == 0
        attn = torch.softmax(logits.masked_fill(off, NEG), dim=2).masked_fill(off, 0)
        return self.norm(nodes + self.drop(self.ctx(attn @ nodes)))


class TextEncoder(nn.Module):
    """Words -> BiGRU (directions averaged) -> sentence, verb and noun nodes -> GCN."""

    def __init__(self, vocab: int) -> None:
        super().__init__()
        self.words = nn.Embedding(vocab, WORD_DIM)
        bound = 1.0 / math.sqrt(WORD_DIM)
        nn.init.uniform_(self.words.weight, -bound, bound)
        self.gru = nn.GRU(WORD_DIM, EMBED, batch_first=True, bidirectional=True)
        for name, weight in self.gru.named_parameters():
            if name.startswith("weight"):
                nn.init.orthogonal_(weight)
            else:
                nn.init.zeros_(weight)
        self.attn = nn.Linear(EMBED, 1)
        self.roles = nn.Embedding(NUM_ROLES, EMBED)
        self.gcn = AttnGCN()
        self.drop = nn.Dropout(DROPOUT)

    def recurrent(self, x: torch.Tensor, lens: torch.Tensor) -> torch.Tensor:
        """[B, L, 300] -> [B, L, 1024]: the GRU over each caption's valid tokens (sorted by
        length and packed, as the public `calc_rnn_outs_with_sort`), directions averaged."""
        order = torch.argsort(lens, descending=True)
        packed = pack_padded_sequence(x[order], lens[order], batch_first=True)
        out, _ = self.gru(packed)
        out, _ = pad_packed_sequence(out, batch_first=True, total_length=x.size(1))
        out = out[torch.argsort(order)]
        return (out[..., :EMBED] + out[..., EMBED:]) / 2

    def forward(self, ids, lens, verb_masks, noun_masks, roles, edges):
        h = self.recurrent(self.drop(self.words(ids)), lens)  # [B, L, H]
        pad = torch.arange(ids.size(1)).unsqueeze(0) >= lens.unsqueeze(1)
        weights = torch.softmax(self.attn(h).squeeze(2).masked_fill(pad, NEG), dim=1)
        sent = (h * weights.unsqueeze(2)).sum(1)

        def max_pool(masks: torch.Tensor) -> torch.Tensor:  # [B, P, L] -> [B, P, H]
            spans = h.unsqueeze(1).masked_fill(~masks.unsqueeze(3), -1e10)
            return spans.max(2).values

        verbs = max_pool(verb_masks) * self.roles(roles[:, :NUM_VERBS])
        nouns = max_pool(noun_masks) * self.roles(roles[:, NUM_VERBS:])
        nodes = self.gcn(torch.cat([sent.unsqueeze(1), verbs, nouns], 1), edges)
        return nodes[:, 0], nodes[:, 1 : 1 + NUM_VERBS], nodes[:, 1 + NUM_VERBS :]


def cosine_matrix(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """[n, d] x [m, d] -> [n, m] cosines (norms with the public code's 1e-18 under the root)."""
    a_norm = torch.sqrt((a * a).sum(1, keepdim=True) + 1e-18)
    b_norm = torch.sqrt((b * b).sum(1, keepdim=True) + 1e-18)
    return (a @ b.t()) / (a_norm * b_norm.t())


def unit(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    return x / x.norm(dim=dim, keepdim=True).clamp(min=1e-10)


def phrase_scores(video, video_valid, phrases, phrase_valid) -> torch.Tensor:
    """[Bv, Bt] attended-cosine scores of one level: per (video, text, node) the segments
    weighted by softmax(sigma * normalised positive cosines), the weighted sum compared
    with the node, averaged over the text's nodes."""
    bv, s, d = video.shape
    bt, p, _ = phrases.shape
    # [Bv, Bt, S, P]
    cos = cosine_matrix(video.reshape(-1, d), phrases.reshape(-1, d))
    cos = cos.view(bv, s, bt, p).transpose(1, 2)
    pad = (~video_valid).view(bv, 1, s, 1)
    attn = cos.masked_fill(pad, 0).clamp(min=0)
    attn = unit(attn, dim=2).masked_fill(pad, NEG)
    attn = torch.softmax(SIGMA * attn, dim=2)
    attended = torch.einsum("vtsp,vsd->vtpd", attn, video)  # [Bv, Bt, P, d]
    node_cos = (unit(attended) * unit(phrases).unsqueeze(0)).sum(-1)  # [Bv, Bt, P]
    valid = phrase_valid.float().unsqueeze(0)
    return (node_cos * valid).sum(2) / phrase_valid.sum(1).float().clamp(min=1).unsqueeze(0)


def hard_positive_loss(scores: torch.Tensor, rel: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """(negative term, hard-positive term), both directions, hardest violation per row and
    column, each averaged over the batch (`ContrastiveLossHP`, max_violation, top-1)."""
    n = scores.size(0)
    eye = torch.eye(n, dtype=torch.bool)
    positive = rel >= THRESHOLD_POS
    diag = scores.diag().view(n, 1)
    total_neg = scores.new_zeros(())
    total_pos = scores.new_zeros(())
    for dim, anchor in ((1, diag), (0, diag.t())):
        cost = (MARGIN + scores - anchor).clamp(min=0).masked_fill(eye | positive, 0)
        total_neg = total_neg + cost.max(dim).values.sum() / n
        hardest = scores.masked_fill(~positive | eye, 1).min(dim, keepdim=True).values
        cost = (MARGIN_POS + scores - hardest).clamp(min=0).masked_fill(eye | positive, 0)
        total_pos = total_pos + cost.max(dim).values.sum() / n
    return total_neg, total_pos


class HGR(nn.Module):
    def __init__(self, vocab: int) -> None:
        super().__init__()
        self.video = VideoEncoder()
        self.text = TextEncoder(vocab)


@dataclass
class Batch:
    fts: torch.Tensor
    fts_lens: torch.Tensor
    ids: torch.Tensor
    lens: torch.Tensor
    verb_masks: torch.Tensor
    noun_masks: torch.Tensor
    roles: torch.Tensor
    edges: torch.Tensor
    rel: dict[str, torch.Tensor]  # sentence / verb / noun relevance, [B, B]


def gather(tables: Tables, rows: torch.Tensor, rel: dict[str, torch.Tensor]) -> Batch:
    """A batch as the public collate function builds it: trimmed to its longest caption."""
    lens = tables.lengths[rows]
    longest = int(lens.max())
    fts = tables.video[rows]
    return Batch(
        fts,
        torch.full((len(rows),), fts.size(1), dtype=torch.long),
        tables.ids[rows, :longest],
        lens,
        tables.verb_masks[rows, :, :longest],
        tables.noun_masks[rows, :, :longest],
        tables.roles[rows],
        tables.edges[rows],
        rel,
    )


def train_step(
    model: HGR, optimiser: torch.optim.Optimizer, batch: Batch, laps: torch_reference.Laps
) -> float:
    """One step of `train_one_batch`; `laps` gets each part's seconds."""
    lap = laps.lap
    optimiser.zero_grad()
    v_sent, v_verb, v_noun = model.video(batch.fts, batch.fts_lens)
    lap("video")
    t_sent, t_verb, t_noun = model.text(
        batch.ids, batch.lens, batch.verb_masks, batch.noun_masks, batch.roles, batch.edges
    )
    lap("text")
    video_valid = torch.arange(v_verb.size(1)).unsqueeze(0) < batch.fts_lens.unsqueeze(1)
    verb_valid = batch.verb_masks.any(2)
    noun_valid = batch.noun_masks.any(2)
    scores = {
        "sentence": cosine_matrix(v_sent, t_sent),
        "verb": phrase_scores(v_verb, video_valid, t_verb, verb_valid),
        "noun": phrase_scores(v_noun, video_valid, t_noun, noun_valid),
    }
    fused = (scores["sentence"] + scores["verb"] + scores["noun"]) / 3
    terms = {lv: hard_positive_loss(s, batch.rel[lv]) for lv, s in scores.items()}
    neg, pos = hard_positive_loss(fused, batch.rel["sentence"])
    loss = neg + pos  # loss_weights None: the fused terms only (the others are logged)
    del terms
    lap("scores_loss")
    loss.backward()
    lap("backward")
    optimiser.step()
    lap("optimiser")
    return float(loss.item())


def _sample(hist: list[int], n: int, generator: torch.Generator) -> torch.Tensor:
    weights = torch.tensor(hist, dtype=torch.float64)
    return torch.multinomial(weights, n, replacement=True, generator=generator)


def random_tables(
    segments: int, words: int, vocab: int, stats: dict | None, generator: torch.Generator
) -> Tables:
    """Random features and captions; each node spans one token of its caption, every noun
    is an argument of the first verb (the common EPIC graph: one verb, its objects)."""
    n = NUM_ROWS
    if stats is None:
        stats = {
            "lengths": [0] + [1] * words,
            "verbs": [0] + [1] * NUM_VERBS,
            "nouns": [1] * (NUM_NOUNS + 1),
        }
    lengths = _sample(stats["lengths"][: words + 1], n, generator).clamp(min=1)
    n_verbs = _sample(stats["verbs"][: NUM_VERBS + 1], n, generator)
    n_nouns = _sample(stats["nouns"][: NUM_NOUNS + 1], n, generator)
    steps = torch.arange(words)
    ids = torch.randint(2, vocab, (n, words), generator=generator) * (steps < lengths[:, None])
    token = (torch.rand(n, NUM_VERBS + NUM_NOUNS, generator=generator) * lengths[:, None]).long()
    slots = torch.arange(NUM_VERBS + NUM_NOUNS)
    present = torch.where(slots < NUM_VERBS, slots < n_verbs[:, None], False)
    present |= (slots >= NUM_VERBS) & (slots - NUM_VERBS < n_nouns[:, None])
    masks = (token[..., None] == steps) & present[..., None]  # [n, 10, L]
    roles = torch.where(
        slots < NUM_VERBS, 0, torch.randint(1, NUM_ROLES, (n, NUM_VERBS + NUM_NOUNS))
    )
    roles = roles * present
    edges = torch.zeros(n, 1 + NUM_VERBS + NUM_NOUNS, 1 + NUM_VERBS + NUM_NOUNS)
    verb_on = present[:, :NUM_VERBS].float()
    edges[:, 1 : 1 + NUM_VERBS, 0] = verb_on  # sentence -> verb
    first_verb = present[:, 0].float()[:, None]
    noun_on = present[:, NUM_VERBS:].float() * first_verb
    edges[:, 1 + NUM_VERBS :, 1] = noun_on  # verb -> its nouns
    edges[:, 1, 1 + NUM_VERBS :] = noun_on  # nouns -> verb
    edges = edges / edges.sum(2, keepdim=True).clamp(min=1)
    return Tables(
        torch.randn(n, segments, VIDEO_DIM, generator=generator),
        ids,
        lengths,
        masks[:, :NUM_VERBS],
        masks[:, NUM_VERBS:],
        roles,
        edges,
    )


def random_relevance(generator: torch.Generator) -> dict[str, torch.Tensor]:
    """Batch relevance as the public `get_relevances_single_caption`: verb equality, noun
    IoU and their mean, of random EPIC-sized classes (97 verbs, 300 nouns, 1-2 nouns)."""
    verbs = torch.randint(0, 97, (BATCH,), generator=generator)
    nouns = torch.zeros(BATCH, 300, dtype=torch.bool)
    nouns[torch.arange(BATCH), torch.randint(0, 300, (BATCH,), generator=generator)] = True
    second = torch.rand(BATCH, generator=generator) < 0.1
    extra = torch.randint(0, 300, (BATCH,), generator=generator)
    nouns[torch.arange(BATCH)[second], extra[second]] = True
    nf = nouns.float()
    inter = nf @ nf.t()
    noun_iou = inter / (nf.sum(1, keepdim=True) + nf.sum(1) - inter)
    verb_eq = (verbs[:, None] == verbs[None]).float()
    return {"sentence": (verb_eq + noun_iou) / 2, "verb": verb_eq, "noun": noun_iou}


def parse_args() -> argparse.Namespace:
    parser = torch_reference.parser(__doc__, steps=10)
    at_least = torch_reference.at_least
    parser.add_argument("--segments", type=at_least(1), default=8, help="segments per video")
    parser.add_argument("--words", type=at_least(1), default=16, help="longest caption")
    parser.add_argument("--vocab", type=at_least(2), default=899)
    parser.add_argument(
        "--caption-stats",
        help="JSON of histograms {lengths, verbs, nouns} to draw captions from",
    )
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    torch_reference.set_threads(args.threads)
    torch.manual_seed(args.seed)
    generator = torch.Generator().manual_seed(args.seed)
    stats = None
    if args.caption_stats:
        with open(args.caption_stats) as f:
            stats = json.load(f)
    tables = random_tables(args.segments, args.words, args.vocab, stats, generator)
    model = HGR(args.vocab)
    model.train()
    optimiser = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE)

    def batch() -> Batch:
        rows = torch.randint(0, NUM_ROWS, (BATCH,), generator=generator)
        return gather(tables, rows, random_relevance(generator))

    if args.check:
        fixed = batch()
        losses = [
            train_step(model, optimiser, fixed, torch_reference.Laps()) for _ in range(args.steps)
        ]
        print(json.dumps(torch_reference.check_losses(losses)))
        return

    def step(b: Batch) -> dict:
        laps = torch_reference.Laps()
        train_step(model, optimiser, b, laps)
        return laps.parts

    batches = [batch() for _ in range(args.warmup + args.steps)]
    times, parts = torch_reference.time_steps(step, batches, args.warmup)
    result = torch_reference.result(
        times,
        parts_ms=torch_reference.median_parts(parts),
        mean_caption_tokens=round(float(tables.lengths.float().mean()), 3),
    )
    print(json.dumps(result))


if __name__ == "__main__":
    main()

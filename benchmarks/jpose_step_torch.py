"""Time of one JPoSE training step in PyTorch (CPU, float32) on random data.

The step reproduces the pattern of `train_epoch` in the public JPoSE PyTorch training loop
(repository aranciokov/RelevanceMargin-ICMR22, file src/train/train_jpose_tripletRelBased.py):
`optimiser.zero_grad()`; then for each part of speech (verb, noun, action) and each
cross-modal pair (tt, tv, vt, vv; weights 1, 2, 1, 1) the anchor, positive and negative
rows (64 anchors x 10 triplets = 640 rows each) are gathered and forwarded one after the
other through the MMEN of that level (action: through the verb and the noun MMEN, the two
outputs concatenated and L2-normalised), the triplet loss
relu(margin + |a - p|^2 - |a - n|^2), averaged, times the pair weight, divided by
3 levels x 4 pairs, is backpropagated at once; one SGD step (lr 0.01, momentum 0.9) ends
the step: 12 forward graphs and 12 backward passes.

Each MMEN has one gated embedding per modality:
x -> L2-normalise -> Linear(in, 256) -> context gating (x * sigmoid(Linear(256, 256)(x)))
-> L2-normalise. Video rows are 3072-d clip features; text rows are the masked mean of a
learned word table (3000 x 100, shared by both parts of speech) over a caption's verb
tokens (4) or noun tokens (8), ids 0 (padding) and 1 (unknown) left out, as in the jaxsvr
JPoSE model this is compared with.

Run by benchmarks/jpose_step_speed.py in its own process (torch and JAX never share one):

  python benchmarks/jpose_step_torch.py [--threads 2] [--steps 20] [--warmup 3] [--seed 0]

The last stdout line is one JSON object: framework, version, threads, ms_per_step (each
timed step), median_ms and gflop_per_step (the multiply-adds of the Linear layers).
Imports only torch, the standard library and `benchmarks/torch_reference.py`.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass

import torch
import torch.nn.functional as F
import torch_reference  # beside this script
from torch import nn

NUM_ROWS = 16115  # rows of the video feature table and of the caption token tables
VIDEO_DIM = 3072
VOCAB_SIZE = 3000
WORD_DIM = 100
EMBED_DIM = 256
TOKENS = {"verb": 4, "noun": 8}
BATCH = 64  # anchors per step
TRIPLETS = 10  # triplets per anchor, level and pair
MARGIN = 1.0
LEARNING_RATE = 0.01
MOMENTUM = 0.9
LEVELS = ("verb", "noun", "action")
PAIR_WEIGHTS = {"tt": 1.0, "tv": 2.0, "vt": 1.0, "vv": 1.0}  # order of the public loop
INPUT_DIM = {"v": VIDEO_DIM, "t": WORD_DIM}

# One step's rows: level -> pair -> (anchor, positive, negative) row indices, [B*K] each.
StepIndices = dict[str, dict[str, tuple[torch.Tensor, torch.Tensor, torch.Tensor]]]


@dataclass
class Tables:
    """The data a step reads rows of: video features and each caption's verb/noun ids."""

    video: torch.Tensor  # [NUM_ROWS, VIDEO_DIM] float32
    tokens: dict[str, torch.Tensor]  # "verb": [NUM_ROWS, 4], "noun": [NUM_ROWS, 8] int64


class GatedEmbedding(nn.Module):
    """Linear -> context gating (glu of cat(x, fc(x))) -> L2-normalise."""

    def __init__(self, in_dim: int, out_dim: int) -> None:
        super().__init__()
        self.fc = nn.Linear(in_dim, out_dim)
        self.gate = nn.Linear(out_dim, out_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.fc(x)
        x = F.glu(torch.cat((x, self.gate(x)), 1), 1)
        return F.normalize(x)


class MMEN(nn.Module):
    """One part of speech: a gated embedding per modality ('v' video, 't' text)."""

    def __init__(self) -> None:
        super().__init__()
        self.branches = nn.ModuleDict(
            {m: GatedEmbedding(dim, EMBED_DIM) for m, dim in INPUT_DIM.items()}
        )

    def forward(self, x: torch.Tensor, modality: str, final_norm: bool = True) -> torch.Tensor:
        x = self.branches[modality](F.normalize(x))
        return F.normalize(x) if final_norm else x


class JPoSE(nn.Module):
    """Verb and noun MMENs and the word table their text branches share."""

    def __init__(self) -> None:
        super().__init__()
        self.words = nn.Embedding(VOCAB_SIZE, WORD_DIM)
        nn.init.normal_(self.words.weight, std=0.1)
        self.mmens = nn.ModuleDict({pos: MMEN() for pos in TOKENS})

    def bag_of_words(self, ids: torch.Tensor) -> torch.Tensor:
        """[n, L] ids -> [n, WORD_DIM]: mean word vector over ids > 1 (count clamped to 1)."""
        mask = (ids > 1).unsqueeze(-1).to(self.words.weight.dtype)
        total = (self.words(ids) * mask).sum(1)
        return total / mask.sum(1).clamp(min=1.0)

    def rows(self, tables: Tables, pos: str, modality: str, idx: torch.Tensor) -> torch.Tensor:
        """The MMEN input of rows `idx`: gathered video features or bag-of-words text."""
        if modality == "v":
            return tables.video[idx]
        return self.bag_of_words(tables.tokens[pos][idx])

    def embed(self, tables: Tables, level: str, modality: str, idx: torch.Tensor) -> torch.Tensor:
        """Embeddings of rows `idx` in space `level` (action: verb and noun MMEN, concatenated
        and L2-normalised; each part of speech gathers its own input, as the public dataset
        hands the action level one tensor per part of speech)."""
        if level != "action":
            return self.mmens[level](self.rows(tables, level, modality, idx), modality)
        parts = [
            self.mmens[pos](self.rows(tables, pos, modality, idx), modality, final_norm=False)
            for pos in TOKENS
        ]
        return F.normalize(torch.cat(parts, 1))


def triplet_loss(anc: torch.Tensor, pos: torch.Tensor, neg: torch.Tensor) -> torch.Tensor:
    """mean(relu(margin + |a - p|^2 - |a - n|^2)) over the rows."""
    d_pos = (anc - pos).pow(2).sum(1)
    d_neg = (anc - neg).pow(2).sum(1)
    return F.relu(MARGIN + d_pos - d_neg).mean()


def train_step(
    model: JPoSE, optimiser: torch.optim.Optimizer, tables: Tables, indices: StepIndices
) -> float:
    """One step of the public loop: 12 (level, pair) losses, each backpropagated at once,
    then one optimiser step. Returns the summed (scaled) loss."""
    optimiser.zero_grad()
    num_terms = len(LEVELS) * len(PAIR_WEIGHTS)
    accum_loss = 0.0
    for level in LEVELS:
        for pair, weight in PAIR_WEIGHTS.items():
            anc_idx, pos_idx, neg_idx = indices[level][pair]
            anc = model.embed(tables, level, pair[0], anc_idx)
            pos = model.embed(tables, level, pair[1], pos_idx)
            neg = model.embed(tables, level, pair[1], neg_idx)
            loss = weight * triplet_loss(anc, pos, neg) / num_terms
            accum_loss += loss.item()
            loss.backward()
    optimiser.step()
    return accum_loss


def random_tokens(length: int, generator: torch.Generator) -> torch.Tensor:
    """[NUM_ROWS, length] ids in [0, VOCAB_SIZE); each row has 1..length tokens, then 0s."""
    ids = torch.randint(0, VOCAB_SIZE, (NUM_ROWS, length), generator=generator)
    counts = torch.randint(1, length + 1, (NUM_ROWS, 1), generator=generator)
    return ids * (torch.arange(length) < counts)


def random_tables(generator: torch.Generator) -> Tables:
    video = torch.randn(NUM_ROWS, VIDEO_DIM, generator=generator)
    return Tables(video, {pos: random_tokens(n, generator) for pos, n in TOKENS.items()})


def random_indices(generator: torch.Generator) -> StepIndices:
    """Rows of one step: per level and pair, 64 anchors each repeated 10 times (as the public
    dataset's np.repeat) and 640 positives and 640 negatives."""

    def draw(n: int) -> torch.Tensor:
        return torch.randint(0, NUM_ROWS, (n,), generator=generator)

    return {
        level: {
            pair: (
                draw(BATCH).repeat_interleave(TRIPLETS),
                draw(BATCH * TRIPLETS),
                draw(BATCH * TRIPLETS),
            )
            for pair in PAIR_WEIGHTS
        }
        for level in LEVELS
    }


def gflop_per_step(batch: int = BATCH, triplets: int = TRIPLETS) -> float:
    """GFLOP of the Linear layers in one step, summed over the 12 (level, pair) graphs.

    A Linear over `rows` rows from `in_dim` to `out_dim` counts 2 * rows * in_dim * out_dim
    for its forward, the same for its weight gradient, and the same again for its input
    gradient when its input requires grad: always for the gating Linear and the text
    branch's first Linear (fed by the learned word table), never for the video branch's
    first Linear (fed by the fixed features). Each of the anchor, positive and negative
    batches goes through one gated embedding per part of speech of the level (action: 2).
    """
    rows = batch * triplets

    def linear(in_dim: int, out_dim: int, input_grad: bool) -> int:
        return 2 * rows * in_dim * out_dim * (3 if input_grad else 2)

    def branch(modality: str) -> int:
        first = linear(INPUT_DIM[modality], EMBED_DIM, input_grad=modality == "t")
        return first + linear(EMBED_DIM, EMBED_DIM, input_grad=True)

    total = 0
    for level in LEVELS:
        mmens = len(TOKENS) if level == "action" else 1
        for pair in PAIR_WEIGHTS:
            total += mmens * (branch(pair[0]) + 2 * branch(pair[1]))
    return total / 1e9


def setup(seed: int) -> tuple[JPoSE, torch.optim.Optimizer, Tables, torch.Generator]:
    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    model = JPoSE()
    optimiser = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE, momentum=MOMENTUM)
    return model, optimiser, random_tables(generator), generator


def check(steps: int, seed: int) -> dict:
    """Losses of `steps` steps on one fixed batch (they should go down)."""
    model, optimiser, tables, generator = setup(seed)
    indices = random_indices(generator)
    losses = [train_step(model, optimiser, tables, indices) for _ in range(steps)]
    return torch_reference.check_losses(losses)


def benchmark(steps: int, warmup: int, seed: int) -> list[float]:
    """Milliseconds of each of `steps` timed steps, after `warmup` untimed ones."""
    model, optimiser, tables, generator = setup(seed)
    indices = [random_indices(generator) for _ in range(warmup + steps)]
    step = functools.partial(train_step, model, optimiser, tables)
    return torch_reference.time_steps(step, indices, warmup)[0]


def main() -> None:
    args = torch_reference.parser(__doc__, steps=20).parse_args()
    torch_reference.set_threads(args.threads)
    torch.set_default_dtype(torch.float32)
    if args.check:
        print(json.dumps(check(args.steps, args.seed)))
        return
    times = benchmark(args.steps, args.warmup, args.seed)
    print(json.dumps(torch_reference.result(times, gflop_per_step=round(gflop_per_step(), 4))))


if __name__ == "__main__":
    main()

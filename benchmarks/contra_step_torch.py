"""Time of one ConTra training step in PyTorch (CPU, float32) on random data.

The step follows the public ConTra code (repository adrianofragomeni/ConTra) with its
EPIC-KITCHENS-100 clip-context command from the README (`python training.py --m-video 4
--m-text 0 --lambda1 1 --lambda2 1 --lambda3 0 --lambda4 1 --nlayer-video 2 --nhead-video
8 --nlayer-text 2 --nhead-text 8 --embed-dim 512 --dataset Epic`) and the defaults of
`src/utils/utils.py` (batch 512, temperature 0.07, Adam lr 1e-4, 1300 warm-up iterations,
dropout 0.3, feed-forward 2048): `src/training.py` `train_epoch`, the branch with clip
context only (zero_grad; `net(texts, videos, branch="all")`, `net(None, negatives,
branch="video")`; the loss; backward; Adam step; the LambdaLR warm-up / linear decay step).

Forward, as `src/models/contra.py`, `text_model.py` and `layers.py` compute it:
- video: the window of 2m + 1 = 9 clips around each clip, [B, 9, 3072] (EPIC's TBN
  features) -> dropout -> Linear(3072, 512) -> + learnt positions -> dropout -> PyTorch's
  `nn.TransformerEncoder` (2 post-LayerNorm layers, 8 heads, feed-forward 2048, dropout
  0.3, sequence-first) with a final LayerNorm -> the centre position -> L2-normalise.
  The neighbour windows (for every clip of the batch, as the public loader hands them) go
  through the same branch.
- text: each sentence's 16 token slots looked up in the frozen word table (a NumPy array,
  66250 x 300, as the public `total_word_embd[x, :]`; tokenising the strings, which the
  public forward also does every step, is done once here, before the timer) ->
  Linear(300, 2048) -> ReLU -> max over all 16 slots -> dropout -> Linear(2048, 512) -> the
  text transformer over its window of one sentence (2 layers, 8 heads, positions, final
  LayerNorm) -> L2-normalise.
- loss (`src/losses/NCE.py`, lambdas 1, 1, 0, 1): the cross-modal NCE over the [B, B]
  scores / 0.07, uniformity over the 2B embeddings (`torch.pdist`, t = 2), and the
  neighbouring video loss over the clips that have a neighbour (paired with the
  neighbour embeddings by position, as the public code does), each as the public code
  writes it (its [n, 1] - [n] broadcasts included).

The number of rows of the feature and caption tables and the fraction of clips with a
neighbour come from the JAX run (`--rows`, `--has-neighbour`); windows are clamped to the
table's ends rather than a video's (the same work).

Run by benchmarks/contra_step_speed.py in its own process (torch and JAX never share one):

  python benchmarks/contra_step_torch.py [--threads 2] [--steps 5] [--warmup 2] [--seed 0]
      [--rows 16115] [--has-neighbour 0.9]

The last stdout line is one JSON object: framework, version, threads, ms_per_step (each
timed step), median_ms, and parts_ms (median ms of the row gather, the text, video and
neighbour-video forwards, the loss, the backward pass and the optimiser step). Imports
only torch, NumPy, the standard library and `benchmarks/torch_reference.py`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
import torch_reference  # beside this script
from torch import nn

BATCH = 512
M_VIDEO = 4  # window half-width: 2m + 1 = 9 clips
VIDEO_DIM = 3072  # 512 * 6, the public Epic input projection's width
EMBED = 512
HEADS, LAYERS, FF_DIM = 8, 2, 2048
DROPOUT = 0.3
WORDS = 16  # max_words of the S3D sentence model
WORD_DIM, TEXT_HIDDEN = 300, 2048
VOCAB = 66250  # the S3D / HowTo100M word table (the public code adds a few missing words)
TEMPERATURE = 0.07
LEARNING_RATE = 1e-4
WARMUP = 1300
EPOCHS = 1000  # the public default, for the schedule's length


@dataclass
class Tables:
    """What a step reads rows of."""

    video: torch.Tensor  # [rows, 3072] float32 clip features
    ids: np.ndarray  # [rows, 16] int64 token ids, 0 after the sentence
    windows: torch.Tensor  # [rows, 9] int64 rows of each clip's window


@dataclass
class Batch:
    rows: torch.Tensor  # [B] the clips
    neighbours: torch.Tensor  # [B] a clip of each window (zeros where none: masked)
    mask: torch.Tensor  # [B] bool, the clip has a neighbour with another narration


class Context(nn.Module):
    """The public `Transformer`: learnt positions, dropout, post-LayerNorm encoder layers
    (sequence-first), final LayerNorm; [n, W, d] -> [W, n, d]."""

    def __init__(self, length: int) -> None:
        super().__init__()
        self.position = nn.Parameter(torch.zeros(length, EMBED))
        nn.init.normal_(self.position, mean=0.0, std=0.001)
        layer = nn.TransformerEncoderLayer(EMBED, HEADS, dim_feedforward=FF_DIM, dropout=DROPOUT)
        self.encoder = nn.TransformerEncoder(
            layer, num_layers=LAYERS, norm=nn.LayerNorm(EMBED), enable_nested_tensor=False
        )
        self.drop = nn.Dropout(DROPOUT)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.encoder(self.drop((x + self.position).permute(1, 0, 2)))


class ConTra(nn.Module):
    """Clip context (m = 4) and the sentence model with its window of one."""

    def __init__(self, words: np.ndarray) -> None:
        super().__init__()
        self.words = words  # frozen, read through NumPy as the public forward does
        self.fc1 = nn.Linear(WORD_DIM, TEXT_HIDDEN)
        self.text_drop = nn.Dropout(DROPOUT)
        self.text_proj = nn.Linear(TEXT_HIDDEN, EMBED)
        self.text_context = Context(1)
        self.video_drop = nn.Dropout(DROPOUT)
        self.video_proj = nn.Linear(VIDEO_DIM, EMBED)
        self.video_context = Context(2 * M_VIDEO + 1)

    def text(self, ids: np.ndarray) -> torch.Tensor:
        x = torch.tensor(self.words[ids])  # [n, 16, 300]
        x = F.relu(self.fc1(x)).max(1).values  # [n, 2048]
        x = self.text_proj(self.text_drop(x.view(len(ids), 1, -1)))
        return F.normalize(self.text_context(x)[0])

    def video(self, windows: torch.Tensor) -> torch.Tensor:  # [n, 9, 3072]
        x = self.video_proj(self.video_drop(windows))
        return F.normalize(self.video_context(x)[M_VIDEO])


def nce_loss(text: torch.Tensor, video: torch.Tensor) -> torch.Tensor:
    """The public `nce_loss`: each pair against its row and column of the scores."""
    sim = text @ video.t() / TEMPERATURE
    x = sim.t()
    x = x.view(sim.shape[0], sim.shape[0], -1)
    nominator = (x * torch.eye(x.shape[0])[:, :, None]).sum(dim=1)
    denominator = torch.cat((x, x.permute(1, 0, 2)), dim=1).view(x.shape[0], -1)
    return torch.mean(torch.logsumexp(denominator, dim=1) - nominator)


def uniformity_loss(embeddings: torch.Tensor, t: float = 2.0) -> torch.Tensor:
    return torch.pdist(embeddings, p=2).pow(2).mul(-t).exp().mean().log()


def neighbouring_video_loss(
    video: torch.Tensor, text: torch.Tensor, negatives: torch.Tensor
) -> torch.Tensor:
    """The public `neighbouring_video_loss` (`negatives` unmasked, paired by position)."""
    nominator = torch.unsqueeze(torch.diag(video @ text.t() / TEMPERATURE), 1)
    neg = torch.unsqueeze(torch.diag(negatives @ text.t() / TEMPERATURE), 1)
    denominator = torch.logsumexp(torch.cat([nominator, neg], 1), dim=1)
    return torch.mean(denominator - nominator)


def train_step(
    model: ConTra,
    optimiser: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    tables: Tables,
    batch: Batch,
    laps: torch_reference.Laps,
) -> float:
    """One iteration of the public `train_epoch` (clip context); `laps` gets each part's
    seconds."""
    videos = tables.video[tables.windows[batch.rows]]  # [B, 9, 3072], the loader's work
    negatives = tables.video[tables.windows[batch.neighbours]]
    ids = tables.ids[batch.rows.numpy()]
    laps.lap("gather")
    optimiser.zero_grad()
    text = model.text(ids)
    laps.lap("text")
    video = model.video(videos)
    laps.lap("video")
    negative = model.video(negatives)
    laps.lap("neighbour_video")
    terms = {
        "Inter_loss": nce_loss(text, video),
        "Uniformity_loss": uniformity_loss(torch.cat([video, text])),
        "Neighbouring_video_loss": neighbouring_video_loss(
            video[batch.mask], text[batch.mask], negative
        ),
    }
    loss = sum(terms.values())
    logged = {k: v.item() for k, v in terms.items()}  # the public loss_dict
    laps.lap("loss")
    loss.backward()
    laps.lap("backward")
    optimiser.step()
    scheduler.step()
    laps.lap("optimiser")
    del logged
    return float(loss.item())


def warmup_linear(optimiser: torch.optim.Optimizer, total: int):
    """The public `get_linear_schedule_with_warmup`."""

    def factor(step: int) -> float:
        if step < WARMUP:
            return step / max(1, WARMUP)
        return max(0.0, (total - step) / max(1, total - WARMUP))

    return torch.optim.lr_scheduler.LambdaLR(optimiser, factor)


def random_tables(rows: int, generator: torch.Generator) -> Tables:
    video = torch.randn(rows, VIDEO_DIM, generator=generator)
    lengths = torch.randint(1, 6, (rows, 1), generator=generator)
    ids = torch.randint(1, VOCAB, (rows, WORDS), generator=generator)
    ids = ids * (torch.arange(WORDS) < lengths)
    offsets = torch.arange(-M_VIDEO, M_VIDEO + 1)
    windows = (torch.arange(rows)[:, None] + offsets).clamp(0, rows - 1)
    return Tables(video, ids.numpy(), windows)


def random_batch(rows: int, has_neighbour: float, generator: torch.Generator) -> Batch:
    anchors = torch.randint(0, rows, (BATCH,), generator=generator)
    offset = torch.randint(1, M_VIDEO + 1, (BATCH,), generator=generator)
    sign = torch.randint(0, 2, (BATCH,), generator=generator) * 2 - 1
    mask = torch.rand(BATCH, generator=generator) < has_neighbour
    neighbours = ((anchors + sign * offset).clamp(0, rows - 1)) * mask
    return Batch(anchors, neighbours, mask)


def main() -> None:
    p = torch_reference.parser(__doc__, steps=5)
    p.add_argument("--rows", type=torch_reference.at_least(2 * M_VIDEO + 1), default=16115)
    p.add_argument("--has-neighbour", type=float, default=0.9, help="fraction of clips")
    args = p.parse_args()
    torch_reference.set_threads(args.threads)
    torch.manual_seed(args.seed)
    generator = torch.Generator().manual_seed(args.seed)
    tables = random_tables(args.rows, generator)
    words = np.random.default_rng(args.seed).standard_normal((VOCAB, WORD_DIM), np.float32)
    model = ConTra(words)
    model.train()
    optimiser = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE)
    steps_per_epoch = -(-args.rows // BATCH)
    scheduler = warmup_linear(optimiser, steps_per_epoch * EPOCHS)

    def step(batch: Batch) -> dict:
        laps = torch_reference.Laps()
        train_step(model, optimiser, scheduler, tables, batch, laps)
        return laps.parts

    if args.check:
        fixed = random_batch(args.rows, args.has_neighbour, generator)
        losses = [
            train_step(model, optimiser, scheduler, tables, fixed, torch_reference.Laps())
            for _ in range(args.steps)
        ]
        print(json.dumps(torch_reference.check_losses(losses)))
        return
    batches = [
        random_batch(args.rows, args.has_neighbour, generator)
        for _ in range(args.warmup + args.steps)
    ]
    times, parts = torch_reference.time_steps(step, batches, args.warmup)
    print(json.dumps(torch_reference.result(times, parts_ms=torch_reference.median_parts(parts))))


if __name__ == "__main__":
    main()

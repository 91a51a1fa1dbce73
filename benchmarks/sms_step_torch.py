"""Time of one SMS training step of projection heads in PyTorch (CPU, float32) on random
data.

The step follows the public SMS code (repository xqwang14/SMS-Loss, after AVION):
`scripts/dirtrain.py` `train` with one update per batch (the learning rate of each
parameter group set, here to a constant, where the public code reads its precomputed
cosine schedule; zero_grad; the model's two
L2-normalised embeddings; `SymmetricMultiSimiliarityLoss` of `avion/losses/losses.py` with
the pair relevance and the batch's rows and columns of the train relevance matrix;
`check_loss_nan` (one `.item()`); backward; the optimiser step; zero_grad(set_to_none);
each logged loss's `.item()`), with AdamW (weight decay on the weights of two or more
dimensions only, the public parameter groups).

What is trained differs from the public run on purpose: the SMS report fine-tunes AVION's
video and text transformers end to end on GPUs (mixed precision, batch 64 per GPU x 4);
here, as in jaxsvr's `configs/epic_sms.py`, both encoders are frozen and only a head per
modality is trained, over precomputed clip features ([rows, video_dim]) and caption
features ([rows, text_dim]): Linear(dim, 1024) -> GELU -> dropout 0.1 -> Linear(1024,
256), L2-normalised as the public model's forward does, batch 128, AdamW lr 1e-3 and
weight decay 1e-4 (`jaxsvr.models.heads`), float32 (the public `torch.cuda.amp` autocast
and GradScaler do nothing on a CPU). `--autocast bf16` carries the public mixed precision
to the CPU: the forward pass and the loss under `torch.autocast("cpu", bfloat16)` (the
public run autocasts to float16 on its GPUs, with a GradScaler that bfloat16's float32
range makes unneeded), parameters and optimiser in float32.

The loss as the public code computes it (margin 0.6, threshold 0.1, one process): the
text-video cosines of `sim_matrix`, every pair's positive score, weight and relevance
repeated into [2B^2, 1] columns for both directions, the off-diagonal entries picked by
`index_select` over `nonzero` of a ones - eye mask built each step, and the batch's
relevance read from the uint8 train matrix (relevance x 240) by row then column. The
matrix here is [rows, rows] of random values with the rows of jaxsvr's train split
(`--rows`; the public one covers the full EPIC-100 train split), each batch row's
video and caption index drawn at random, the pair's own relevance from the matrix.

Run by benchmarks/sms_step_speed.py in its own process (torch and JAX never share one):

  python benchmarks/sms_step_torch.py [--threads 2] [--steps 20] [--warmup 3] [--seed 0]
      [--batch 128] [--rows 16115] [--video-dim 3072] [--text-dim 512] [--autocast bf16]

The last stdout line is one JSON object: framework, version, threads, ms_per_step (each
timed step), median_ms, and parts_ms (median ms of the row gather, the video and text
heads, the loss, the backward pass and the optimiser step). Imports only torch, the
standard library and `benchmarks/torch_reference.py`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import torch
import torch.nn.functional as F
import torch_reference  # beside this script
from torch import nn

HIDDEN, EMBED = 1024, 256
DROPOUT = 0.1
MARGIN, THRES = 0.6, 0.1  # --loss-margin, --loss-thres
UINT_FACTOR = 240  # the public loss stores relevance x 240 as uint8
LEARNING_RATE, WEIGHT_DECAY = 1e-3, 1e-4


@dataclass
class Tables:
    video: torch.Tensor  # [rows, video_dim] frozen clip features
    text: torch.Tensor  # [rows, text_dim] frozen caption features
    relevance: torch.Tensor  # [rows, rows] uint8, relevance x 240 (videos x captions)


@dataclass
class Batch:
    videos: torch.Tensor  # [B] video rows
    captions: torch.Tensor  # [B] caption rows (the pair's caption)


class Head(nn.Module):
    """Linear -> GELU -> dropout -> Linear (`jaxsvr.models.heads.Projection`, 'mlp')."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.hidden = nn.Linear(dim, HIDDEN)
        self.drop = nn.Dropout(DROPOUT)
        self.out = nn.Linear(HIDDEN, EMBED)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.drop(F.gelu(self.hidden(x))))


class Heads(nn.Module):
    def __init__(self, video_dim: int, text_dim: int) -> None:
        super().__init__()
        self.video = Head(video_dim)
        self.text = Head(text_dim)


def sim_matrix(a: torch.Tensor, b: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """The public cosine matrix (norms clamped at eps)."""
    a_n, b_n = a.norm(dim=1)[:, None], b.norm(dim=1)[:, None]
    a_norm = a / torch.max(a_n, eps * torch.ones_like(a_n))
    b_norm = b / torch.max(b_n, eps * torch.ones_like(b_n))
    return torch.mm(a_norm, b_norm.transpose(0, 1))


def sms_loss(
    image: torch.Tensor,
    text: torch.Tensor,
    weight: torch.Tensor,
    relevancy_weight: torch.Tensor,
    matrix: torch.Tensor,
) -> torch.Tensor:
    """`SymmetricMultiSimiliarityLoss.forward` on one process (fix_norm on)."""
    x = sim_matrix(text, image)
    n = x.size()[0]
    x1 = torch.diag(x).unsqueeze(1).expand(n, n).contiguous().view(-1, 1)
    x1 = torch.cat((x1, x1), 0)
    w1 = weight.unsqueeze(1).expand(n, n).contiguous().view(-1, 1)
    w1 = torch.cat((w1, w1), 0)
    x2 = torch.cat((x.view(-1, 1), x.transpose(0, 1).contiguous().view(-1, 1)), 0)
    relevancy_weight = relevancy_weight.view(1, 2, -1)
    col, row = relevancy_weight.split(split_size=1, dim=1)
    rw = matrix[row.reshape(-1)][:, col.reshape(-1)] / UINT_FACTOR
    rw = torch.cat((rw.transpose(0, 1).contiguous().view(-1, 1), rw.view(-1, 1)), 0)
    keep = torch.ones(x.shape) - torch.eye(x.shape[0])
    keep1 = keep.view(-1, 1)
    keep2 = keep.transpose(0, 1).contiguous().view(-1, 1)
    keep_idx = torch.nonzero(torch.cat((keep1, keep2), 0).flatten()).flatten()
    x1_ = torch.index_select(x1, dim=0, index=keep_idx)
    w1_ = torch.index_select(w1, dim=0, index=keep_idx)
    x2_ = torch.index_select(x2, dim=0, index=keep_idx)
    rw_ = torch.index_select(rw, dim=0, index=keep_idx)
    weight_matrix = w1_ - rw_
    max_margin = weight_matrix * MARGIN - (x1_ - x2_)
    eps = 1.1 / UINT_FACTOR
    max_margin = torch.where(
        weight_matrix > eps,
        F.relu(max_margin),
        torch.where(
            torch.abs(weight_matrix) < eps,
            F.relu(torch.abs(max_margin) - THRES),
            F.relu(-max_margin),
        ),
    )
    return max_margin.mean()


def train_step(
    model: Heads,
    optimiser: torch.optim.Optimizer,
    lr: float,
    tables: Tables,
    batch: Batch,
    laps: torch_reference.Laps,
    autocast: bool = False,
) -> float:
    """One iteration of the public `train`; `laps` gets each part's seconds. `autocast`:
    the forward pass and the loss under bfloat16 autocast, where the public code wraps
    them in `amp.autocast` (CUDA's float16 autocast, its default)."""
    for group in optimiser.param_groups:
        group["lr"] = lr
    video = tables.video[batch.videos]  # the loader's rows
    text = tables.text[batch.captions]
    weight = tables.relevance[batch.videos, batch.captions].float() / UINT_FACTOR
    relevancy_weight = torch.cat((batch.captions.unsqueeze(0), batch.videos.unsqueeze(0)), 0)
    laps.lap("gather")
    optimiser.zero_grad()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):  # amp.autocast
        image_features = F.normalize(model.video(video), dim=-1)
        laps.lap("video")
        text_features = F.normalize(model.text(text), dim=-1)
        laps.lap("text")
        loss = sms_loss(image_features, text_features, weight, relevancy_weight, tables.relevance)
    if not torch.isfinite(loss).item():  # check_loss_nan
        raise SystemExit(f"loss is {loss.item()}")
    laps.lap("loss")
    loss.backward()
    laps.lap("backward")
    optimiser.step()
    model.zero_grad(set_to_none=True)
    logged = {k: loss.item() for k in ("loss", "max_margin_loss")}  # the metric meters
    laps.lap("optimiser")
    return logged["loss"]


def parameter_groups(model: nn.Module) -> list[dict]:
    """The public AdamW groups: weight decay on weights of two or more dimensions."""
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2 and "bias" not in n]
    rest = [p for n, p in model.named_parameters() if not (p.ndim >= 2 and "bias" not in n)]
    return [{"params": decay, "weight_decay": WEIGHT_DECAY}, {"params": rest, "weight_decay": 0}]


def random_tables(rows: int, video_dim: int, text_dim: int, generator: torch.Generator) -> Tables:
    relevance = torch.randint(0, UINT_FACTOR + 1, (rows, rows), generator=generator)
    return Tables(
        torch.randn(rows, video_dim, generator=generator),
        torch.randn(rows, text_dim, generator=generator),
        relevance.to(torch.uint8),
    )


def main() -> None:
    p = torch_reference.parser(__doc__, steps=20)
    at_least = torch_reference.at_least
    p.add_argument("--batch", type=at_least(2), default=128)
    p.add_argument("--rows", type=at_least(2), default=16115)
    p.add_argument("--video-dim", type=at_least(1), default=3072)
    p.add_argument("--text-dim", type=at_least(1), default=512)
    p.add_argument("--autocast", choices=("off", "bf16"), default="off")
    args = p.parse_args()
    autocast = args.autocast == "bf16"
    torch_reference.set_threads(args.threads)
    torch.manual_seed(args.seed)
    generator = torch.Generator().manual_seed(args.seed)
    tables = random_tables(args.rows, args.video_dim, args.text_dim, generator)
    model = Heads(args.video_dim, args.text_dim)
    model.train()
    optimiser = torch.optim.AdamW(
        parameter_groups(model), lr=LEARNING_RATE, betas=(0.9, 0.999), eps=1e-8
    )

    def batch() -> Batch:
        rows = torch.randint(0, args.rows, (2, args.batch), generator=generator)
        return Batch(rows[0], rows[1])

    def step(b: Batch) -> dict:
        laps = torch_reference.Laps()
        train_step(model, optimiser, LEARNING_RATE, tables, b, laps, autocast)
        return laps.parts

    if args.check:
        fixed = batch()
        losses = [
            train_step(
                model, optimiser, LEARNING_RATE, tables, fixed, torch_reference.Laps(), autocast
            )
            for _ in range(args.steps)
        ]
        print(json.dumps(torch_reference.check_losses(losses)))
        return
    batches = [batch() for _ in range(args.warmup + args.steps)]
    times, parts = torch_reference.time_steps(step, batches, args.warmup)
    parts_ms = torch_reference.median_parts(parts)
    print(json.dumps(torch_reference.result(times, parts_ms=parts_ms, autocast=args.autocast)))


if __name__ == "__main__":
    main()

"""Stage 5 — sampling: which rows form each batch, a pure function of (seed, epoch, step).

- `pairs`: epoch order and (video, caption) batch pairs with their relevance (batch losses).
- `triplets`: offline triplets with margins (JPoSE / MME) and their row layout.
- `neighbours`: ConTra's neighbour negatives from context windows.
"""

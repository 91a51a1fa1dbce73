"""Device mesh, shardings, and global arrays from per-process data.

Data parallelism first: every device sits on one `data` axis (`config.mesh.data = -1`),
parameters and optimizer state are replicated, and batches are split along their first
axis. In a multi-host run (`jax.distributed.initialize` before the trainer starts) each
process produces only its `process_slice` of every global batch and
`global_batch` assembles the global `jax.Array` from the per-process parts.
"""

from __future__ import annotations

import jax
import numpy as np
from jax.sharding import AxisType, NamedSharding, PartitionSpec

from jaxsvr.errors import InputError


def make_mesh(data: int = -1) -> jax.sharding.Mesh:
    """A 1-D mesh over `data` devices (-1: all of them)."""
    count = jax.device_count()
    size = count if data == -1 else data
    if size < 1 or size > count or count % size:
        raise InputError(
            f"config.mesh.data = {data} does not fit the {count} devices: use -1 (all) or a "
            f"divisor of {count}"
        )
    return jax.make_mesh((size,), ("data",), axis_types=(AxisType.Auto,))


def replicated(mesh: jax.sharding.Mesh) -> NamedSharding:
    return NamedSharding(mesh, PartitionSpec())


def batch_sharded(mesh: jax.sharding.Mesh) -> NamedSharding:
    """Split along the first axis over `data`."""
    return NamedSharding(mesh, PartitionSpec("data"))


def check_batch_size(batch_size: int, mesh: jax.sharding.Mesh) -> None:
    devices = mesh.shape["data"]
    if batch_size % devices:
        raise InputError(
            f"config.train.batch_size = {batch_size} is not divisible by the {devices} "
            "devices of the mesh: pick a multiple"
        )


def process_slice(global_size: int, index: int | None = None, count: int | None = None) -> slice:
    """Process `index`'s share (this process's by default) of a global batch of
    `global_size` along the first axis, split over `count` processes (all by default)."""
    count = jax.process_count() if count is None else count
    index = jax.process_index() if index is None else index
    per = global_size // count
    return slice(index * per, (index + 1) * per)


def global_batch(local, mesh: jax.sharding.Mesh):
    """Global arrays, batch-sharded, from this process's slices (any pytree of arrays)."""
    sharding = batch_sharded(mesh)
    return jax.tree.map(
        lambda v: jax.make_array_from_process_local_data(sharding, np.asarray(v)), local
    )

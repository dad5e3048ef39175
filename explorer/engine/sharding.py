"""A run on several devices: its inputs split over a 1-D ``data`` mesh, its
model and optimizer state replicated, and XLA's SPMD partitioner (GSPMD)
inserting the communication.

Every JIT mode keeps working unchanged: ``jax.jit`` / ``nnx.jit`` see arrays
that carry a ``NamedSharding`` and compile one program per device with the
collectives it needs (an all-gather where a layer reads rows another device
holds, an all-reduce of the gradients, which are sums over the split rows).
The losses equal one device's up to the order of floating-point sums.

Which axis is split (:func:`split_axis`): an array's longest axis (nodes for
features, labels and masks; edges for ``edge_index`` and the CSR arrays;
graphs for a dataset's labels) when the device count divides it, else the
array is replicated. Bucket padding (``RunConfig.bucket_padding``) rounds
sizes up to powers of two, so every array splits over 2, 4 or 8 devices.
"""

from __future__ import annotations

from explorer import jax_first  # noqa: F401  (must stay before JAX's import)

# isort: split
import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from gnncore import parallel
from gnncore.parallel import replicate  # every array copied whole onto each device

__all__ = ["AXIS", "layout", "make_mesh", "place", "replicate", "split_axis"]

AXIS = "data"


def make_mesh(devices: int) -> Mesh:
    """A 1-D mesh (axis ``data``) of the first ``devices`` devices; a
    ``ValueError`` naming ``devices`` if there are fewer."""
    return parallel.data_mesh(devices, axis=AXIS)


def split_axis(shape: tuple[int, ...], devices: int) -> int | None:
    """The axis an array of ``shape`` is split along over ``devices``: its
    longest (the first of equals), if ``devices`` divides it; else ``None``
    (replicated)."""
    if devices <= 1 or not shape:
        return None
    axis = int(np.argmax(shape))
    return axis if shape[axis] % devices == 0 and shape[axis] >= devices else None


def _sharding(array, mesh: Mesh) -> NamedSharding:
    axis = split_axis(tuple(array.shape), mesh.size)
    spec = [None] * len(array.shape)
    if axis is not None:
        spec[axis] = AXIS
    return NamedSharding(mesh, PartitionSpec(*spec))


def place(tree, mesh: Mesh):
    """Every array of ``tree`` on ``mesh``, split along :func:`split_axis`."""
    return jax.tree.map(lambda a: jax.device_put(a, _sharding(a, mesh)), tree)


def layout(arrays: dict[str, object]) -> list[dict]:
    """One row per array: ``name``, ``shape``, ``spec`` (its PartitionSpec),
    ``devices`` (how many hold a piece), ``shard`` (the shape each holds) and
    ``bytes_per_device``; for the diagnose panel and the CLI."""
    rows = []
    for name, array in arrays.items():
        sharding = getattr(array, "sharding", None)
        if sharding is None:
            continue
        shard = sharding.shard_shape(array.shape)
        spec = getattr(sharding, "spec", None)
        rows.append({"name": name, "shape": tuple(array.shape), "dtype": str(array.dtype),
                     "spec": str(spec) if spec is not None else type(sharding).__name__,
                     "devices": len(sharding.device_set), "shard": tuple(shard),
                     "bytes_per_device": int(np.prod(shard, dtype=np.int64)
                                             * array.dtype.itemsize)})
    return rows

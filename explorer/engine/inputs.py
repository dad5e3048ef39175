"""What a training step reads, as pytrees that ``jit`` traces.

Both classes are written to be copied as they are into exported scripts
(``explorer.export``), so they import nothing but ``dataclasses``, ``typing``
and ``jax``.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

from explorer import jax_first  # noqa: F401  (must stay before JAX's import)

# isort: split
import jax


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class StepInputs:
    """Everything the training step reads: a pytree whose arrays jit traces.

    ``batch`` and ``num_graphs`` are set only when whole graphs are classified
    (many small graphs trained as one padded batch): ``batch`` says which graph
    each node belongs to, and ``num_graphs`` is static (not traced), because it
    is the number of rows that pooling returns.
    """

    x: jax.Array  # node features [nodes, features]
    adj: object  # the edges: a gnncore Adjacency (sorted, with CSR pointers)
    edge_weight: jax.Array | None  # one weight per edge, or None
    y: jax.Array  # the class of each target (node, or graph slot); -1: none
    train_mask: jax.Array  # the targets in the loss
    node_mask: jax.Array  # real nodes (False on padding)
    batch: jax.Array | None = None  # the graph each node belongs to
    num_graphs: int | None = dataclasses.field(default=None, metadata={"static": True})


class EvalTargets(NamedTuple):
    """The labels and train/val/test masks of the real targets: the first
    ``len(labels)`` rows of the logits (rows past them are padding)."""

    labels: jax.Array
    train: jax.Array
    val: jax.Array
    test: jax.Array

"""Edge-list utilities that stay traceable: every output shape depends only on
input shapes, never on values (no ``remove``-style filtering of edges).

Where PyG drops edges (e.g. existing self-loops before adding new ones), we keep
the edge and give it weight 0 or mask it, so the edge count stays static.
"""

from __future__ import annotations

import jax.numpy as jnp

from gnncore.segment import segment_sum

__all__ = [
    "add_remaining_self_loops",
    "as_edge_index",
    "add_self_loops",
    "degree",
    "gcn_norm",
    "is_self_loop",
]


def as_edge_index(edge_index):
    """The ``[2, E]`` array of an ``edge_index`` or of an :class:`Adjacency`."""
    return getattr(edge_index, "edge_index", edge_index)


def degree(index, num_nodes: int, *, edge_weight=None, dtype=jnp.float32):
    """Number (or total weight) of edges per node in ``index`` ([E]).

    ``degree(edge_index[1], n)`` is the in-degree, ``degree(edge_index[0], n)``
    the out-degree.
    """
    values = (jnp.ones(index.shape[0], dtype=dtype) if edge_weight is None
              else edge_weight.astype(dtype))
    return segment_sum(values, index, num_nodes)


def is_self_loop(edge_index):
    """Boolean mask [E]: True where source == target."""
    return edge_index[0] == edge_index[1]


def _loop_index(num_nodes: int, dtype):
    loops = jnp.arange(num_nodes, dtype=dtype)
    return jnp.stack([loops, loops])


def add_self_loops(edge_index, num_nodes: int, *, edge_weight=None,
                   fill_value: float = 1.0):
    """Append one loop (i, i) per node: ``E`` edges become ``E + num_nodes``.

    Existing self-loops are kept as they are (so a node may have two). Returns
    ``(edge_index, edge_weight)``; ``edge_weight`` is ``None`` if it was given
    as ``None``.
    """
    new_index = jnp.concatenate(
        [edge_index, _loop_index(num_nodes, edge_index.dtype)], axis=1)
    if edge_weight is None:
        return new_index, None
    loop_w = jnp.full((num_nodes,), fill_value, dtype=edge_weight.dtype)
    return new_index, jnp.concatenate([edge_weight, loop_w])


def add_remaining_self_loops(edge_index, num_nodes: int, *, edge_weight=None,
                             fill_value: float = 1.0):
    """Give every node exactly one weighted self-loop (PyG semantics), jit-safely.

    A node that already has a self-loop keeps that loop's weight (the largest,
    if it has several); others get ``fill_value``. PyG removes the old loop
    edges, which changes the edge count; here they stay in place with weight 0
    and a new loop is appended per node, so the result always has
    ``E + num_nodes`` edges and the same maths.
    Returns ``(edge_index, edge_weight)``.
    """
    if edge_weight is None:
        edge_weight = jnp.ones(edge_index.shape[1], dtype=jnp.float32)
    loop = is_self_loop(edge_index)
    # Out-of-range positions are dropped: only existing loops take part. A node
    # with several loops keeps the largest weight, so the result does not depend
    # on edge order (PyG keeps an arbitrary one; equal weights agree).
    target = jnp.where(loop, edge_index[0], num_nodes)
    kept = jnp.full((num_nodes,), -jnp.inf, dtype=edge_weight.dtype)
    kept = kept.at[target].max(edge_weight, mode="drop")
    has_loop = jnp.zeros((num_nodes,), bool).at[target].set(True, mode="drop")
    loop_w = jnp.where(has_loop, kept, jnp.asarray(fill_value, edge_weight.dtype))
    edge_weight = jnp.where(loop, jnp.zeros_like(edge_weight), edge_weight)
    new_index = jnp.concatenate(
        [edge_index, _loop_index(num_nodes, edge_index.dtype)], axis=1)
    return new_index, jnp.concatenate([edge_weight, loop_w])


def gcn_norm(edge_index, num_nodes: int, *, edge_weight=None, improved=False,
             add_self_loops: bool = True):
    r"""Symmetric GCN normalisation :math:`\hat D^{-1/2} \hat A \hat D^{-1/2}`.

    :math:`\hat A = A + I` (or :math:`A + 2I` with ``improved``) when
    ``add_self_loops``; degrees are summed at the target node. A node of degree
    0 gets coefficient 0 instead of ``inf``/``NaN``. Returns
    ``(edge_index, edge_weight)`` with the normalised weight of every edge.
    """
    fill = 2.0 if improved else 1.0
    if edge_weight is None:
        edge_weight = jnp.ones(edge_index.shape[1], dtype=jnp.float32)
    if add_self_loops:
        edge_index, edge_weight = add_remaining_self_loops(
            edge_index, num_nodes, edge_weight=edge_weight, fill_value=fill)
    src, dst = edge_index[0], edge_index[1]
    deg = segment_sum(edge_weight, dst, num_nodes)
    safe = jnp.where(deg > 0, deg, 1.0)
    deg_inv_sqrt = jnp.where(deg > 0, 1.0 / jnp.sqrt(safe), 0.0)
    return edge_index, deg_inv_sqrt[src] * edge_weight * deg_inv_sqrt[dst]

"""Edge-list utilities that stay traceable: every output shape depends only on
input shapes, never on values (no ``remove``-style filtering of edges).

Where PyG drops edges (e.g. existing self-loops before adding new ones), we keep
the edge and give it weight 0 or mask it, so the edge count stays static
(:func:`remove_self_loops` returns such a mask, which :func:`add_self_loops`
takes).

The exceptions are :func:`coalesce` and :func:`to_undirected`, whose output size
depends on the data: they run eagerly only (on the host, before ``jit``) and
raise ``ValueError`` when traced.
"""

from __future__ import annotations

import operator

import jax
import jax.numpy as jnp
import numpy as np

from gnncore.segment import segment_max, segment_min, segment_sum

__all__ = [
    "FILL_REDUCTIONS",
    "add_remaining_self_loops",
    "as_edge_index",
    "add_self_loops",
    "coalesce",
    "degree",
    "gcn_norm",
    "is_self_loop",
    "remove_self_loops",
    "to_device",
    "to_undirected",
]


def to_device(a) -> jax.Array:
    """A host array (numpy, list, scalar) as a JAX array on the default device,
    without a compile.

    In jax 0.10, ``jnp.array`` and ``jnp.asarray`` of a numpy array compile and
    run a small identity program for every new shape and dtype (8-25 ms each on
    CPU), so building a graph of a new size cost a compile per array. The dtype
    is canonicalised as they do it (float64 -> float32, int64 -> int32 unless
    x64 is on). ``a`` is copied on the host first: on CPU, ``jax.device_put``
    of a large aligned numpy array can share its memory even with
    ``may_alias=False`` (179 of 200 times in one test), and a later change of
    ``a`` would then change the JAX array. Host data only: outside jit, like
    the graph builders that use it."""
    return jax.device_put(np.array(a))


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


#: the reductions a string ``fill_value`` of :func:`add_self_loops` may name
FILL_REDUCTIONS = ("mean", "add", "sum", "max", "min")


def remove_self_loops(edge_index, edge_attr=None, *, edge_mask=None):
    """PyG's ``remove_self_loops`` at a static shape: the loops stay in place.

    Instead of dropping them, the returned ``edge_mask`` ([E] bool) is False at
    every self-loop (and wherever a given ``edge_mask`` was already False);
    layers leave masked edges out (e.g. ``segment_softmax(..., mask=)``) and
    :func:`add_self_loops` skips them when it reduces a ``fill_value``.
    Returns ``(edge_index, edge_attr, edge_mask)`` (``edge_index`` and
    ``edge_attr`` unchanged).
    """
    edge_index = as_edge_index(edge_index)
    keep = ~is_self_loop(edge_index)
    if edge_mask is not None:
        keep = keep & edge_mask
    return edge_index, edge_attr, keep


def _check_fill_value(fill_value) -> None:
    if isinstance(fill_value, str) and fill_value not in FILL_REDUCTIONS:
        raise ValueError(f"unknown fill_value {fill_value!r}; use a number or one of "
                         f"{list(FILL_REDUCTIONS)}")


def _loop_values(edge_weight, dst, num_nodes: int, fill_value, edge_mask):
    """The weights / features of the appended loops (PyG's ``fill_value``):
    a number (or an array broadcast to ``[num_nodes, ...]``), or a reduction
    of each node's incoming unmasked edges' values (0 without any)."""
    shape = (num_nodes,) + edge_weight.shape[1:]
    if not isinstance(fill_value, str):
        return jnp.broadcast_to(jnp.asarray(fill_value, edge_weight.dtype), shape)
    keep = (jnp.ones(dst.shape[0], bool) if edge_mask is None else edge_mask)
    if fill_value in ("max", "min"):
        # Masked edges go to an extra segment that is dropped.
        seg = jnp.where(keep, dst, num_nodes)
        reduce = segment_max if fill_value == "max" else segment_min
        return reduce(edge_weight, seg, num_nodes + 1)[:num_nodes]
    wide = keep.reshape((-1,) + (1,) * (edge_weight.ndim - 1))
    total = segment_sum(jnp.where(wide, edge_weight, 0.0), dst, num_nodes)
    if fill_value in ("add", "sum"):
        return total
    count = segment_sum(keep.astype(edge_weight.dtype), dst, num_nodes)
    return total / jnp.maximum(count, 1.0).reshape((num_nodes,) + (1,) * (total.ndim - 1))


def add_self_loops(edge_index, num_nodes: int, *, edge_weight=None,
                   fill_value: float | str = 1.0, edge_mask=None):
    """Append one loop (i, i) per node: ``E`` edges become ``E + num_nodes``.

    Existing self-loops are kept as they are (so a node may have two), unless
    ``edge_mask`` (from :func:`remove_self_loops`) masks them out.

    Arguments:
        edge_index: ``[2, E]``.
        num_nodes: number of nodes (static).
        edge_weight: ``[E]`` weights or ``[E, ...]`` edge features, or ``None``.
        fill_value: the weight / feature of each appended loop: a number (or an
            array broadcast to one loop's features), or, as in PyG, a reduction
            of the node's incoming edges: ``"mean"``, ``"add"`` (``"sum"``),
            ``"max"`` or ``"min"``; a node without incoming edges gets 0.
        edge_mask: ``[E]`` bool, False for edges that are gone (PyG would have
            removed them): they take no part in a reduced ``fill_value``.

    Returns ``(edge_index, edge_weight)``; ``edge_weight`` is ``None`` if it
    was given as ``None``. With ``edge_mask`` it returns ``(edge_index,
    edge_weight, edge_mask)``, the mask extended with True for the new loops.
    """
    _check_fill_value(fill_value)
    edge_index = as_edge_index(edge_index)
    new_index = jnp.concatenate(
        [edge_index, _loop_index(num_nodes, edge_index.dtype)], axis=1)
    new_weight = None
    if edge_weight is not None:
        loop_w = _loop_values(edge_weight, edge_index[1], num_nodes, fill_value, edge_mask)
        new_weight = jnp.concatenate([edge_weight, loop_w])
    if edge_mask is None:
        return new_index, new_weight
    return new_index, new_weight, jnp.concatenate([edge_mask, jnp.ones(num_nodes, bool)])


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
    # counted, not set: on TPU a scatter of booleans compiled for 6 s (10k nodes,
    # 100k edges), a scatter-add in 0.4 s
    has_loop = jnp.zeros((num_nodes,), jnp.int32).at[target].add(1, mode="drop") > 0
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


# ------------------------------------------------------------ static graph count
def _is_traced(*arrays) -> bool:
    return any(isinstance(a, jax.core.Tracer) for a in arrays)


def _static_num_graphs(batch, num_graphs, *, mask=None, arg: str = "num_graphs") -> int:
    """The number of graphs as a Python ``int`` (shared by norms and pools).

    ``num_graphs`` wins when given (it must be static). ``batch=None`` means one
    graph. Otherwise it is ``max(batch) + 1`` over the unmasked nodes, which can
    only be read eagerly: under a trace this raises ``ValueError`` naming ``arg``.
    """
    if num_graphs is not None:
        try:
            return operator.index(num_graphs)
        except TypeError as err:  # a tracer, a float ...
            raise ValueError(
                f"{arg} must be a static Python int (the number of graphs); got "
                f"{type(num_graphs).__name__}") from err
    if batch is None:
        return 1
    if _is_traced(batch, mask):
        raise ValueError(
            f"the number of graphs cannot be read from a traced batch vector: pass "
            f"{arg}=<number of graphs> (a Python int) when calling this under "
            f"jax.jit / nnx.jit")
    ids = np.asarray(batch)
    if mask is not None:
        ids = ids[np.asarray(mask, dtype=bool)]
    return int(ids.max()) + 1 if ids.size else 1


# ------------------------------------------------------------ eager-only helpers
def _require_eager(name: str, *arrays) -> None:
    if _is_traced(*arrays):
        raise ValueError(
            f"{name} is eager-only: the number of edges it returns depends on the "
            f"edge values, which a traced (jit) function cannot have. Call it once on "
            f"the host before jit (e.g. before Graph.from_arrays); inside jit keep the "
            f"duplicate edges (segment sums already add them up) or mask edges instead.")


_REDUCE = {
    "sum": np.add, "add": np.add, "max": np.maximum, "min": np.minimum, "mean": np.add,
    "mul": np.multiply,
}


def coalesce(edge_index, edge_weight=None, num_nodes: int | None = None,
             reduce: str = "sum"):
    """Sort edges by (source, target) and merge duplicates (eager only).

    Duplicate edges' weights are combined with ``reduce`` (``"sum"``/``"add"``,
    ``"mean"``, ``"max"``, ``"min"``, ``"mul"``); ``edge_weight`` may be ``[E]``
    or ``[E, D]`` (edge features). ``num_nodes`` defaults to
    ``max(edge_index) + 1`` and is only used to check the range. Returns
    ``(edge_index, edge_weight)`` as JAX arrays, ``edge_weight`` ``None`` if it
    was given as ``None`` (gnncore's convention; PyG returns the bare
    ``edge_index`` then). The output size depends on the data, so under
    ``jax.jit`` this raises ``ValueError``: run it on the host first.
    """
    _require_eager("coalesce", as_edge_index(edge_index), edge_weight)
    if reduce not in _REDUCE:
        raise ValueError(f"unknown reduce {reduce!r}; choose one of {sorted(_REDUCE)}")
    ei = np.asarray(as_edge_index(edge_index))
    if ei.ndim != 2 or ei.shape[0] != 2:
        raise ValueError(f"edge_index must have shape [2, E]; got {ei.shape}")
    num_edges = ei.shape[1]
    w = None if edge_weight is None else np.asarray(edge_weight)
    if w is not None and w.shape[:1] != (num_edges,):
        raise ValueError(f"edge_weight must have {num_edges} rows; got shape {w.shape}")
    if num_nodes is None:
        num_nodes = int(ei.max()) + 1 if num_edges else 0
    if num_edges and (ei.min() < 0 or ei.max() >= num_nodes):
        raise ValueError(f"edge_index has node ids outside [0, {num_nodes})")
    key = ei[0].astype(np.int64) * max(int(num_nodes), 1) + ei[1].astype(np.int64)
    order = np.argsort(key, kind="stable")
    key = key[order]
    first = np.ones(num_edges, dtype=bool)
    first[1:] = key[1:] != key[:-1]
    starts = np.flatnonzero(first)
    out_index = to_device(ei[:, order][:, starts])
    if w is None:
        return out_index, None
    sw = w[order]
    out_w = _REDUCE[reduce].reduceat(sw, starts, axis=0) if num_edges else sw
    if reduce == "mean" and num_edges:
        counts = np.diff(np.append(starts, num_edges))
        out_w = out_w / counts.reshape((-1,) + (1,) * (sw.ndim - 1))
    return out_index, to_device(out_w.astype(w.dtype))


def to_undirected(edge_index, edge_weight=None, num_nodes: int | None = None, *,
                  reduce: str = "sum"):
    """Add the reverse of every edge, then :func:`coalesce` (eager only).

    As in PyG, the weights of ``(i, j)`` and ``(j, i)`` are combined with
    ``reduce``, so both directions end up with the same weight; a self-loop
    meets itself, so with ``"sum"`` its weight doubles. Returns
    ``(edge_index, edge_weight)`` (``edge_weight`` ``None`` if not given). Raises
    ``ValueError`` under ``jax.jit``: the edge count depends on the data.
    """
    _require_eager("to_undirected", as_edge_index(edge_index), edge_weight)
    ei = np.asarray(as_edge_index(edge_index))
    if ei.ndim != 2 or ei.shape[0] != 2:
        raise ValueError(f"edge_index must have shape [2, E]; got {ei.shape}")
    both = np.concatenate([ei, ei[::-1]], axis=1)
    w = None
    if edge_weight is not None:
        w = np.asarray(edge_weight)
        w = np.concatenate([w, w], axis=0)
    return coalesce(both, w, num_nodes, reduce=reduce)

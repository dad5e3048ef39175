r"""Graph pooling with static shapes: global readouts and top-k node selection.

Global pools reduce the nodes of each graph to one row:

.. math::
    \mathbf{r}_g = \bigoplus_{i:\ b_i = g} \mathbf{x}_i,
    \qquad \bigoplus \in \{\textstyle\sum, \text{mean}, \max, \min\}.

:class:`TopKPooling` and :class:`SAGPooling` keep the best-scoring nodes of
each graph. PyG's versions return as many nodes and edges as the data selects,
which a compiled function cannot do; here every output has a size fixed by the
input *shapes* (see :class:`TopKPooling`), the unused slots are masked, and
edges stay where they were with a mask. Both therefore run under ``jax.jit``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
from flax import nnx

from gnncore.conv.gcn import GCNConv
from gnncore.segment import (
    segment_max,
    segment_mean,
    segment_min,
    segment_softmax,
    segment_sum,
)
from gnncore.utils import _static_num_graphs, as_edge_index

__all__ = [
    "PoolOutput",
    "SAGPooling",
    "TopKPooling",
    "global_add_pool",
    "global_max_pool",
    "global_mean_pool",
    "global_min_pool",
]


# ------------------------------------------------------------------ readouts
def _global_pool(reduce, x, batch, size, mask):
    if batch is None:
        num = 1 if size is None else _static_num_graphs(None, size, arg="size")
        if num != 1:
            raise ValueError(f"batch=None means one graph, so size must be 1 (or None); "
                             f"got size={num}")
        ids = jnp.zeros((x.shape[0],), jnp.int32)
    else:
        num = _static_num_graphs(batch, size, mask=mask, arg="size")
        ids = batch
    if mask is not None:
        ids = jnp.where(mask, ids, num)  # out of range: dropped by the segment ops
    return reduce(x, ids, num)


_POOL_DOC = """Per-graph {what} of node features (PyG's ``global_{name}_pool``).

    Arguments:
        x: node features ``[N, F]`` (any trailing shape).
        batch: graph id of each node ``[N]``; ``None`` means one graph.
        size: number of graphs ``B`` (a Python int). Read from ``batch`` when
            running eagerly (``max(batch) + 1`` over unmasked nodes); under
            ``jax.jit`` it must be given, or ``ValueError`` names ``size``.
        mask: ``[N]`` bool; False nodes (padding) take no part.

    Returns ``[B, F]`` (``[1, F]`` when ``batch`` is None). A graph with no
    (unmasked) node gives 0; node ids outside ``[0, B)`` are ignored.
    """


def global_add_pool(x, batch=None, size: int | None = None, *, mask=None):
    return _global_pool(segment_sum, x, batch, size, mask)


def global_mean_pool(x, batch=None, size: int | None = None, *, mask=None):
    return _global_pool(segment_mean, x, batch, size, mask)


def global_max_pool(x, batch=None, size: int | None = None, *, mask=None):
    return _global_pool(segment_max, x, batch, size, mask)


def global_min_pool(x, batch=None, size: int | None = None, *, mask=None):
    return _global_pool(segment_min, x, batch, size, mask)


global_add_pool.__doc__ = _POOL_DOC.format(what="sum", name="add")
global_mean_pool.__doc__ = _POOL_DOC.format(what="mean", name="mean")
global_max_pool.__doc__ = _POOL_DOC.format(what="element-wise maximum", name="max")
global_min_pool.__doc__ = _POOL_DOC.format(what="element-wise minimum", name="min")


# ------------------------------------------------------------------ top-k
class PoolOutput(NamedTuple):
    """What :class:`TopKPooling` / :class:`SAGPooling` return (a tuple)."""

    x: jax.Array           # [K, F] selected features * score * multiplier; 0 in empty slots
    edge_index: jax.Array  # [2, E] relabelled; dropped edges point at (K, K)
    edge_mask: jax.Array   # [E] bool, True for edges between two selected nodes
    batch: jax.Array       # [K] graph of each slot; num_graphs in empty slots
    perm: jax.Array        # [K] input index of each slot (arbitrary in empty slots)
    score: jax.Array       # [K] gating score of each slot; 0 in empty slots
    node_mask: jax.Array   # [K] bool, True for slots holding a selected node


_ACTIVATIONS = {"tanh": jnp.tanh, "sigmoid": jax.nn.sigmoid}


def _resolve_activation(nonlinearity) -> Callable:
    if callable(nonlinearity):
        return nonlinearity
    try:
        return _ACTIVATIONS[nonlinearity]
    except KeyError:
        raise ValueError(f"unknown nonlinearity {nonlinearity!r}; pass a callable or one "
                         f"of {sorted(_ACTIVATIONS)}") from None


def _check_ratio(ratio, min_score):
    if min_score is not None:
        return ratio  # PyG: min_score takes precedence and ratio is ignored
    if isinstance(ratio, bool) or ratio is None:
        raise ValueError(f"ratio must be a float in (0, 1] or an int >= 1; got {ratio!r}")
    if isinstance(ratio, int):
        if ratio < 1:
            raise ValueError(f"an integer ratio is the number of nodes kept per graph and "
                             f"must be >= 1; got {ratio}")
        return ratio
    ratio = float(ratio)
    if not 0.0 < ratio <= 1.0:
        raise ValueError(f"a float ratio must lie in (0, 1]; got {ratio} (pass an int to "
                         f"keep a fixed number of nodes per graph)")
    return ratio


class _SelectPool(nnx.Module):
    """Shared selection, relabelling and masking of TopKPooling / SAGPooling."""

    _MIN_SCORE_TOL = 1e-7  # PyG's tolerance: the best node of a graph always survives

    def _init_common(self, in_features, ratio, min_score, multiplier, nonlinearity):
        self.in_features = in_features
        self.ratio = _check_ratio(ratio, min_score)
        self.min_score = None if min_score is None else float(min_score)
        self.multiplier = float(multiplier)
        self.nonlinearity = _resolve_activation(nonlinearity)

    def output_size(self, num_nodes: int, num_graphs: int = 1) -> int:
        """The static number of output slots ``K`` for ``num_nodes`` (padded) input
        nodes in ``num_graphs`` graphs."""
        if self.min_score is not None:
            return num_nodes
        if isinstance(self.ratio, int):
            return min(num_nodes, self.ratio * num_graphs)
        return min(num_nodes, math.ceil(self.ratio * num_nodes) + num_graphs - 1)

    def _project(self, attn, edge_index):  # raw score per node, [N]
        raise NotImplementedError

    def __call__(self, x, edge_index, batch=None, num_graphs: int | None = None, *,
                 mask=None, edge_mask=None, attn=None) -> PoolOutput:
        n = x.shape[0]
        ei = as_edge_index(edge_index)
        num = _static_num_graphs(batch, num_graphs, mask=mask, arg="num_graphs")
        ids = (jnp.zeros((n,), jnp.int32) if batch is None
               else jnp.asarray(batch).astype(jnp.int32))
        valid = (ids >= 0) & (ids < num)
        if mask is not None:
            valid = valid & mask
        group = jnp.where(valid, ids, num)  # invalid nodes form group `num`, sorted last

        # Edges that take part: in range, unmasked, between two valid nodes.
        row, col = ei[0], ei[1]
        in_range = (row >= 0) & (row < n) & (col >= 0) & (col < n)
        row_c, col_c = jnp.clip(row, 0, max(n - 1, 0)), jnp.clip(col, 0, max(n - 1, 0))
        e_ok = in_range & valid[row_c] & valid[col_c]
        if edge_mask is not None:
            e_ok = e_ok & edge_mask
        # Masked edges become the out-of-range loop (n, n): scatters drop it.
        live_index = jnp.where(e_ok, ei, n)

        raw = self._project(x if attn is None else attn, live_index)
        if self.min_score is None:
            score = self.nonlinearity(raw)
        else:
            score = segment_softmax(raw, group, num, mask=valid)

        size = self.output_size(n, num)
        perm, slot_ok = self._select(jax.lax.stop_gradient(score), valid, group, num, size)

        slot_score = jnp.where(slot_ok, score[perm], 0.0)
        gate = slot_score.reshape((size,) + (1,) * (x.ndim - 1))
        x_out = x[perm] * gate
        if self.multiplier != 1.0:
            x_out = x_out * self.multiplier
        x_out = jnp.where(slot_ok.reshape(gate.shape), x_out, jnp.zeros_like(x_out))
        batch_out = jnp.where(slot_ok, ids[perm], num)

        slots = jnp.arange(size, dtype=jnp.int32)
        new_index = jnp.full((n,), size, jnp.int32).at[perm].set(
            jnp.where(slot_ok, slots, size))
        new_row, new_col = new_index[row_c], new_index[col_c]
        keep_edge = e_ok & (new_row < size) & (new_col < size)
        ei_out = jnp.where(keep_edge, jnp.stack([new_row, new_col]), size).astype(ei.dtype)
        return PoolOutput(x_out, ei_out, keep_edge, batch_out, perm, slot_score, slot_ok)

    def _select(self, score, valid, group, num, size):
        """``(perm [K], slot_ok [K])``: selected nodes first (PyG's order), then the
        rest."""
        n = score.shape[0]
        iota = jnp.arange(n, dtype=jnp.int32)
        if self.min_score is None:
            count = segment_sum(valid.astype(jnp.int32), group, num)
            if isinstance(self.ratio, int):
                k = jnp.minimum(count, self.ratio)
            else:  # float32 ceil, as PyG computes it
                k = jnp.ceil(self.ratio * count.astype(jnp.float32)).astype(jnp.int32)
                k = jnp.minimum(k, count)
            # Sort by (graph, descending score, node index): graph-major as in PyG.
            order = jnp.lexsort((iota, -score, group))
            g_sorted = group[order]
            start = jnp.cumsum(count) - count
            rank = iota - jnp.take(start, g_sorted, mode="clip")
            keep = (g_sorted < num) & (rank < jnp.take(k, g_sorted, mode="clip"))
        else:
            # PyG: keep score > min(max score of the graph - tol, min_score), in node order.
            best = segment_max(score, group, num)
            threshold = jnp.minimum(jnp.take(best, group, mode="clip") - self._MIN_SCORE_TOL,
                                    self.min_score)
            order, keep = iota, valid & (score > threshold)
        first = jnp.argsort(~keep, stable=True)[:size]  # selected slots first, stably
        return order[first], keep[first]


_STATIC_DOC = """
    **Static shapes (how this differs from PyG).** PyG returns exactly the selected
    nodes and edges, a data-dependent size that ``jax.jit`` cannot express. Here
    the output has ``K`` node slots and all ``E`` edges, ``K`` fixed by shapes:

    - float ``ratio``: graph ``g`` keeps ``ceil(ratio * n_g)`` of its ``n_g`` real
      (unmasked) nodes, exactly as PyG; the slots are
      ``K = min(N, ceil(ratio * N) + num_graphs - 1)`` for ``N`` input rows
      (padding included), which can hold every graph's share (``ceil`` adds less
      than one node per graph); with one graph ``K = ceil(ratio * N)``;
    - int ``ratio``: graph ``g`` keeps ``min(ratio, n_g)`` nodes;
      ``K = min(N, ratio * num_graphs)``;
    - ``min_score``: the kept count is unbounded, so ``K = N``.

    Selected nodes fill the first slots in PyG's order (graph by graph, by
    descending score; ties by node index, where PyG's order is unspecified; in
    node order with ``min_score``). The remaining slots have ``node_mask``
    False, ``x`` and ``score`` 0, ``batch`` equal to ``num_graphs`` (out of range,
    so a segment reduction over ``num_graphs`` graphs drops them) and an
    arbitrary valid ``perm``. Edges keep their positions: an edge between two
    selected nodes is relabelled to their slots, every other edge becomes
    ``(K, K)`` (out of range, so scatter-based layers such as ``GCNConv`` ignore
    it) with ``edge_mask`` False; ``edge_attr`` rows stay aligned and need no
    filtering. PyG's outputs are ``x[node_mask]``, ``edge_index[:, edge_mask]``,
    ``batch[node_mask]``, ``perm[node_mask]`` and ``score[node_mask]``.

    Call ``pool(x, edge_index, batch=None, num_graphs=None, *, mask=None,
    edge_mask=None, attn=None)``. ``num_graphs`` (static int) is required under
    ``jax.jit`` when ``batch`` is given. ``mask`` ([N] bool) marks real nodes,
    ``edge_mask`` ([E] bool) real edges; nodes with a graph id outside
    ``[0, num_graphs)`` and edges with an endpoint outside ``[0, N)`` or on an
    invalid node count as padding too, so a second pooling layer can take the
    first one's output directly (pass ``mask=out.node_mask``). ``attn``
    replaces ``x`` as the input of the score. Unlike PyG there is no
    ``edge_attr`` argument (edges are never reordered), so ``batch`` is the
    third positional argument. Returns a :class:`PoolOutput`
    ``(x, edge_index, edge_mask, batch, perm, score, node_mask)``.

    ``ratio`` must be a float in ``(0, 1]`` or an int >= 1; PyG treats any
    ``ratio >= 1`` as a node count, so its float ``ratio=1.0`` keeps one node
    per graph where this keeps them all.
"""


class TopKPooling(_SelectPool):
    r"""Top-k pooling (Gao & Ji, 2019; Cangea et al., 2018; PyG's ``TopKPooling``).

    .. math::
        \mathbf{y} = \sigma\!\Big(\frac{\mathbf{X}\mathbf{p}}{\|\mathbf{p}\|}\Big),
        \qquad \mathbf{i} = \mathrm{top}_k(\mathbf{y}),
        \qquad \mathbf{X}' = (\mathbf{X} \odot \mathbf{y})_{\mathbf{i}} \cdot m

    with :math:`\sigma` the ``nonlinearity`` (tanh) and :math:`m` the
    ``multiplier``. With ``min_score`` :math:`\tilde\alpha`,
    :math:`\mathbf{y} = \mathrm{softmax}_{\text{graph}}(\mathbf{X}\mathbf{p})`
    (no norm, no nonlinearity) and the nodes with :math:`y_i > \tilde\alpha` are
    kept (always at least each graph's best).

    Arguments:
        in_features: feature size ``F``.
        ratio: share of nodes kept per graph (float), or their number (int).
        min_score: keep nodes by softmax score instead of ``ratio``.
        multiplier: factor applied to the pooled features.
        nonlinearity: a callable, ``"tanh"`` or ``"sigmoid"``.
        rngs: ``nnx.Rngs``; ``weight`` :math:`\mathbf{p}` (``[1, F]``) is drawn
            from ``U(-1/sqrt(F), 1/sqrt(F))`` as in PyG.
    """

    def __init__(self, in_features: int, ratio: float | int = 0.5, *,
                 min_score: float | None = None, multiplier: float = 1.0,
                 nonlinearity: str | Callable = "tanh", rngs: nnx.Rngs):
        self._init_common(in_features, ratio, min_score, multiplier, nonlinearity)
        bound = 1.0 / math.sqrt(max(in_features, 1))
        self.weight = nnx.Param(jax.random.uniform(
            rngs.params(), (1, in_features), jnp.float32, -bound, bound))

    def _project(self, attn, edge_index):
        w = self.weight[...]
        raw = jnp.sum(attn * w, axis=-1)
        if self.min_score is None:
            raw = raw / jnp.linalg.norm(w)
        return raw


class SAGPooling(_SelectPool):
    r"""Self-attention graph pooling (Lee et al., 2019; PyG's ``SAGPooling``).

    .. math::
        \mathbf{y} = \sigma(\mathrm{GNN}(\mathbf{X}, \mathbf{A})),
        \qquad \mathbf{i} = \mathrm{top}_k(\mathbf{y}),
        \qquad \mathbf{X}' = (\mathbf{X} \odot \mathbf{y})_{\mathbf{i}} \cdot m

    The score GNN is ``gnn.GCNConv(in_features, 1)`` (attribute ``gnn``), run on
    the unmasked edges only. With ``min_score`` the scores are a per-graph
    softmax of the GNN output instead, as in :class:`TopKPooling`.

    Arguments:
        in_features: feature size ``F``.
        ratio, min_score, multiplier, nonlinearity: as in :class:`TopKPooling`.
        gnn: ``"gcn"`` (the only choice). PyG's default score GNN is
            ``GraphConv``; JraphX uses ``GCNConv`` like this class.
        rngs: ``nnx.Rngs`` for the GCN weights.
    """

    def __init__(self, in_features: int, ratio: float | int = 0.5, *, gnn: str = "gcn",
                 min_score: float | None = None, multiplier: float = 1.0,
                 nonlinearity: str | Callable = "tanh", rngs: nnx.Rngs):
        if gnn != "gcn":
            raise ValueError(f"SAGPooling: unsupported gnn {gnn!r}; only 'gcn' is available")
        self._init_common(in_features, ratio, min_score, multiplier, nonlinearity)
        self.gnn = GCNConv(in_features, 1, rngs=rngs)

    def _project(self, attn, edge_index):
        return self.gnn(attn, edge_index)[:, 0]


TopKPooling.__doc__ += _STATIC_DOC
SAGPooling.__doc__ += _STATIC_DOC

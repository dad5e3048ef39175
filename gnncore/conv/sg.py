r"""SGConv: simple graph convolution (Wu et al., 2019).

.. math::
    \mathbf{X}' = \hat{\mathbf{A}}_{\text{norm}}^{K}\, \mathbf{X} \mathbf{\Theta}
    + \mathbf{b},
    \qquad \hat{\mathbf{A}}_{\text{norm}} = \hat{\mathbf{D}}^{-1/2} \hat{\mathbf{A}}
    \hat{\mathbf{D}}^{-1/2},
    \qquad \hat{\mathbf{A}} = \mathbf{A} + \mathbf{I},
    \qquad \hat{D}_{ii} = \textstyle\sum_j \hat{A}_{ij}

where :math:`A_{ij}` is the weight of edge :math:`j \to i` (1 by default) and a
node that already has a self-loop keeps its weight (GCN's normalisation, see
:func:`gnncore.utils.gcn_norm`). Without ``add_self_loops``,
:math:`\hat{\mathbf{A}} = \mathbf{A}`.

Shapes: ``x`` ``(|V|, F_in)`` (or :class:`~gnncore.sparse.SparseFeatures`),
``edge_index`` ``(2, |E|)`` (or an :class:`~gnncore.sparse.Adjacency` for the
fused CSR kernel), ``edge_weight`` ``(|E|,)`` optional → ``(|V|, F_out)``.

This module also holds the pieces the other propagation-only layers share
(:class:`PropagationCache`, :func:`gcn_weights`, :class:`WeightedSum`).
"""

from __future__ import annotations

from typing import ClassVar

import jax
from flax import nnx

from gnncore.inits import linear
from gnncore.message_passing import MessagePassing
from gnncore.sparse import apply_linear, as_dense, spmm
from gnncore.utils import as_edge_index, gcn_norm

__all__ = ["PropagationCache", "SGConv", "WeightedSum", "gcn_weights"]


class PropagationCache(nnx.Variable):
    """Holds a precomputed propagation (normalised weights or smoothed
    features); not a parameter, never trained."""


def is_traced(*trees) -> bool:
    """True if any array in ``trees`` is a tracer (inside jit / grad / vmap)."""
    return any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves(trees))


def rows(values, like):
    """``values`` ([N]) with trailing singleton axes to broadcast against ``like``."""
    return values.reshape(values.shape + (1,) * (like.ndim - 1))


def gcn_weights(edge_index, num_nodes: int, edge_weight=None, *,
                add_self_loops: bool = True):
    r"""GCN-normalised weights split into the given edges and a diagonal.

    Returns ``(weight, loop)``: ``weight`` ([E]) is the coefficient of each
    given edge in :math:`\hat D^{-1/2} \hat A \hat D^{-1/2}` (existing
    self-loops get 0: their weight moved to the diagonal), ``loop`` ([N]) the
    diagonal, or ``None`` without ``add_self_loops``. Keeping the self-loops out
    of the edge list leaves the edges (and an :class:`Adjacency`'s CSR
    structure) as they are.
    """
    index = as_edge_index(edge_index)
    _, weight = gcn_norm(index, num_nodes, edge_weight=edge_weight,
                         add_self_loops=add_self_loops)
    n_edges = index.shape[1]
    if add_self_loops:
        return weight[:n_edges], weight[n_edges:]
    return weight, None


class WeightedSum(MessagePassing):
    r"""Base of the propagation-only layers:
    :math:`\mathbf{out}_i = d_i \mathbf{h}_i + \sum_{e = (j \to i)} w_e \mathbf{h}_j`.

    :meth:`weighted_sum` runs it over an edge list or, fused, over an
    :class:`Adjacency`; the optional diagonal ``d`` stands in for self-loops.
    """

    def __init__(self):
        super().__init__(aggr="sum")

    def weighted_sum(self, edge_index, h, weight, diag=None):
        out = self.propagate(edge_index, h, edge_weight=weight)
        if diag is not None:
            out = out + rows(diag, h) * h
        return out

    def message(self, x_j, edge_weight=None):
        return x_j if edge_weight is None else rows(edge_weight, x_j) * x_j

    def message_and_aggregate(self, adj, x_src, x_dst, num_nodes, edge_weight=None):
        return spmm(adj, edge_weight, x_src)


class SGConv(WeightedSum):
    """Simple graph convolution (PyG's ``SGConv``): ``K`` GCN propagations of the
    features, then one linear layer (with the bias, if any).

    Arguments:
        in_features: input feature size ``F_in``.
        out_features: output feature size ``F_out``.
        K: number of propagation steps (hops); ``0`` gives a plain linear layer.
        cached: compute :math:`\\hat A^K X` once and reuse it: the layer is then a
            linear model on fixed features (transductive learning on one graph).
            The cache is filled either explicitly by :meth:`precompute` or by
            the first *eager* call (as in PyG). A traced call (``jax.jit``,
            ``nnx.jit``, ``grad``, ``vmap``) can never fill it, because a traced
            value must not outlive its trace: it raises ``ValueError`` instead,
            so call ``precompute`` (or the layer once) eagerly before the
            compiled step. Once filled, the cache is used as is: ``x``,
            ``edge_index`` and ``edge_weight`` are ignored apart from the node
            count, which must match (``ValueError`` otherwise). The cache is a
            :class:`PropagationCache` variable, so a compiled step reads it as
            an input, never as a baked-in constant; no gradient flows into it.
        add_self_loops: add a self-loop per node before normalising (a node
            that already has one keeps its weight).
        bias: learn an additive bias.
        rngs: ``nnx.Rngs`` for the weights (torch.nn.Linear's init, as PyG).

    Call ``layer(x, edge_index, edge_weight=None)``. Without the cache and with
    ``F_out < F_in`` the features are transformed first
    (:math:`\\hat A^K (X \\Theta)`, the same maths on fewer columns).
    """

    takes_edge_weight: ClassVar[bool] = True

    def __init__(self, in_features: int, out_features: int, *, K: int = 1,
                 cached: bool = False, add_self_loops: bool = True, bias: bool = True,
                 rngs: nnx.Rngs):
        super().__init__()
        if K < 0:
            raise ValueError(f"SGConv needs K >= 0; got K={K}")
        self.in_features, self.out_features = in_features, out_features
        self.K, self.cached, self.add_self_loops = int(K), cached, add_self_loops
        self.lin = linear(in_features, out_features, bias=bias, rngs=rngs)
        self._cached_x = PropagationCache(None)

    def smooth(self, x, edge_index, edge_weight=None):
        r""":math:`\hat A^K x` (no weights involved)."""
        weight, loop = gcn_weights(edge_index, x.shape[0], edge_weight,
                                   add_self_loops=self.add_self_loops)
        for _ in range(self.K):
            x = self.weighted_sum(edge_index, x, weight, loop)
        return x

    def precompute(self, x, edge_index, edge_weight=None) -> None:
        r"""Fill the cache with :math:`\hat A^K x`, eagerly (outside any jit)."""
        h = self.smooth(as_dense(x), edge_index, edge_weight)
        if is_traced(h):
            raise ValueError("SGConv.precompute must run eagerly, outside jit/grad/vmap: "
                             "call it once before the compiled step")
        self._cached_x.set_value(h)

    def clear_cache(self) -> None:
        """Empty the cache (e.g. before switching to another graph)."""
        self._cached_x.set_value(None)

    def __call__(self, x, edge_index, edge_weight=None):
        if self.cached:
            h = self._cached_x.get_value()
            if h is None:
                h = self.smooth(as_dense(x), edge_index, edge_weight)
                if is_traced(h):
                    raise ValueError(
                        "SGConv(cached=True) has an empty cache inside a traced call "
                        "(jit/grad/vmap), where it cannot be filled: call "
                        "layer.precompute(x, edge_index) (or the layer once) eagerly "
                        "before the compiled step")
                self._cached_x.set_value(h)
            elif h.shape[0] != x.shape[0]:
                raise ValueError(
                    f"SGConv cache holds {h.shape[0]} nodes but x has {x.shape[0]}: "
                    "call precompute again (or clear_cache) for the new graph")
            return apply_linear(self.lin, jax.lax.stop_gradient(h))
        if self.out_features < x.shape[1]:
            # A^K is linear: propagate F_out columns instead of F_in.
            h = self.smooth(x @ self.lin.kernel[...], edge_index, edge_weight)
            return h if self.lin.bias is None else h + self.lin.bias[...]
        return apply_linear(self.lin, self.smooth(as_dense(x), edge_index, edge_weight))

r"""GCNConv: the graph convolution of Kipf & Welling (2017).

.. math::
    \mathbf{X}' = \hat{\mathbf{D}}^{-1/2} \hat{\mathbf{A}} \hat{\mathbf{D}}^{-1/2}
    \mathbf{X} \mathbf{\Theta} + \mathbf{b},
    \qquad \hat{\mathbf{A}} = \mathbf{A} + \mathbf{I}\ (\text{or } + 2\mathbf{I}),
    \qquad \hat{D}_{ii} = \textstyle\sum_j \hat{A}_{ij}

where :math:`A_{ij}` is the weight of edge :math:`j \to i` (1 by default).

Shapes: ``x`` ``(|V|, F_in)``, ``edge_index`` ``(2, |E|)`` (or an
:class:`~gnncore.sparse.Adjacency` for the fused CSR kernel), ``edge_weight``
``(|E|,)`` optional → ``(|V|, F_out)``.
"""

from __future__ import annotations

from typing import ClassVar

import jax
import jax.numpy as jnp
from flax import nnx

from gnncore.inits import linear, zeros
from gnncore.message_passing import MessagePassing
from gnncore.sparse import Adjacency, apply_linear, spmm
from gnncore.utils import as_edge_index, gcn_norm

__all__ = ["GCNCache", "GCNConv"]


class GCNCache(nnx.Variable):
    """Holds a precomputed normalisation; not a parameter, never trained."""


class GCNConv(MessagePassing):
    """Graph convolution (PyG's ``GCNConv``).

    Arguments:
        in_features: input feature size ``F_in``.
        out_features: output feature size ``F_out``.
        improved: use :math:`A + 2I` instead of :math:`A + I`, with or
            without ``edge_weight`` (a node that already has a self-loop keeps
            that loop's weight). Unlike PyG 2.8.1: its ``gcn_norm`` drops the
            fill value 2 when no edge weights are given, so ``GCNConv(improved=True)``
            called without ``edge_weight`` computes :math:`A + I` there; pass
            all-ones edge weights to PyG to get gnncore's :math:`A + 2I`.
        cached: reuse a normalisation filled by :meth:`precompute_norm`. The
            cache is never filled implicitly (a traced call cannot write module
            state that outlives the trace); call ``precompute_norm`` eagerly
            first. A call with an empty cache, or with a different node count,
            raises ``ValueError``. For graphs that never change.
        add_self_loops: add a self-loop per node (a node that already has one
            keeps its weight). Defaults to ``normalize``.
        normalize: apply the symmetric normalisation; with ``False`` the raw
            ``edge_weight`` (or 1) is used.
        bias: learn an additive bias.
        rngs: ``nnx.Rngs`` for the weights (glorot, as in PyG).
    """

    takes_edge_weight: ClassVar[bool] = True

    def __init__(self, in_features: int, out_features: int, *, improved: bool = False,
                 cached: bool = False, add_self_loops: bool | None = None,
                 normalize: bool = True, bias: bool = True, rngs: nnx.Rngs):
        super().__init__(aggr="sum")
        if add_self_loops is None:
            add_self_loops = normalize
        if add_self_loops and not normalize:
            raise ValueError("GCNConv: add_self_loops=True needs normalize=True")
        self.in_features, self.out_features = in_features, out_features
        self.improved, self.cached = improved, cached
        self.add_self_loops, self.normalize = add_self_loops, normalize
        self.lin = linear(in_features, out_features, bias=False, init="glorot", rngs=rngs)
        self.bias = nnx.Param(zeros(rngs.params(), (out_features,))) if bias else None
        # Filled by precompute_norm: (edge_index, weights) for an edge list, or
        # (None, off-diagonal weights, self-loop weights) for an Adjacency.
        self._cache_index = GCNCache(None)
        self._cache_weight = GCNCache(None)
        self._cache_loop = GCNCache(None)
        self._cache_num_nodes = -1

    def precompute_norm(self, edge_index, num_nodes: int, edge_weight=None) -> None:
        """Fill the cache (eagerly, outside any jit) for ``cached=True``.

        ``edge_index`` may be an edge list or an :class:`Adjacency`; later calls
        must pass the same kind.
        """
        if isinstance(as_edge_index(edge_index), jax.core.Tracer):
            raise ValueError("GCNConv.precompute_norm must run eagerly, outside jit: "
                             "call it once before the compiled step")
        index, weight, loop = self._normalise(edge_index, edge_weight, int(num_nodes))
        self._cache_index.set_value(index)
        self._cache_weight.set_value(weight)
        self._cache_loop.set_value(loop)
        self._cache_num_nodes = int(num_nodes)

    def _normalise(self, edge_index, edge_weight, num_nodes):
        """``(edge_index, weight, loop_weight)``: with an Adjacency the self-loops
        stay out of the edge list and become a diagonal term (``loop_weight``)."""
        adj = edge_index if isinstance(edge_index, Adjacency) else None
        index = as_edge_index(edge_index)
        if self.normalize:
            index, weight = gcn_norm(index, num_nodes, edge_weight=edge_weight,
                                     improved=self.improved,
                                     add_self_loops=self.add_self_loops)
        else:
            weight = edge_weight
        if adj is None:
            return index, weight, None
        n_edges = adj.num_edges
        if weight is None:
            weight = jnp.ones((n_edges,), jnp.float32)
        loop = weight[n_edges:] if weight.shape[0] > n_edges else None
        return None, weight[:n_edges], loop

    def __call__(self, x, edge_index, edge_weight=None):
        num_nodes = x.shape[0]
        if self.cached and self.normalize:
            if self._cache_weight.get_value() is None:
                raise ValueError("GCNConv(cached=True) has an empty cache: call "
                                 "layer.precompute_norm(edge_index, num_nodes) eagerly "
                                 "before the first forward pass")
            if self._cache_num_nodes != num_nodes:
                raise ValueError(
                    f"GCNConv cache was computed for {self._cache_num_nodes} nodes but x "
                    f"has {num_nodes}: call precompute_norm again for the new graph")
            index, weight, loop = (self._cache_index.get_value(),
                                   self._cache_weight.get_value(),
                                   self._cache_loop.get_value())
            if (index is None) != isinstance(edge_index, Adjacency):
                raise ValueError("GCNConv cache was filled for a different kind of "
                                 "edge input (edge_index vs Adjacency): pass the same kind")
        else:
            index, weight, loop = self._normalise(edge_index, edge_weight, num_nodes)
        # Transform first: aggregation then runs on F_out features, not F_in.
        h = apply_linear(self.lin, x)
        if index is None:  # Adjacency: fused CSR product plus the diagonal term
            out = self.propagate(edge_index, h, edge_weight=weight)
            if loop is not None:
                out = out + loop[:, None] * h
        else:
            out = self.propagate(index, h, edge_weight=weight)
        if self.bias is not None:
            out = out + self.bias[...]
        return out

    def message(self, x_j, edge_weight=None):
        return x_j if edge_weight is None else edge_weight[:, None] * x_j

    def message_and_aggregate(self, adj, x_src, x_dst, num_nodes, edge_weight=None):
        return spmm(adj, edge_weight, x_src)

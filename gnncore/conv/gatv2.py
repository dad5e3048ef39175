r"""GATv2Conv: dynamic graph attention (Brody et al., 2022).

.. math::
    \mathbf{x}'_i = \Big\Vert_{h=1}^{H} \sum_{j \in \mathcal{N}(i) \cup \{i\}}
    \alpha^{h}_{i,j}\, \mathbf{\Theta}^{h}_{s}\mathbf{x}_j
    \;+\; \mathbf{\Theta}_{\mathrm{res}}\mathbf{x}_i \;+\; \mathbf{b},

.. math::
    \alpha^{h}_{i,j} = \operatorname{softmax}_j\Big(\mathbf{a}^{h\top}
    \operatorname{LeakyReLU}\big(\mathbf{\Theta}^{h}_{s}\mathbf{x}_j
    + \mathbf{\Theta}^{h}_{t}\mathbf{x}_i
    + \mathbf{\Theta}^{h}_{e}\mathbf{e}_{j,i}\big)\Big)

(heads averaged instead of concatenated with ``concat=False``; the residual
term only with ``residual=True``, the edge term only with ``edge_dim``).
Unlike :class:`~gnncore.conv.gat.GATConv`, the non-linearity sits *between*
the projection and the attention vector, so the ranking of neighbours depends
on the query node ("dynamic" attention). :math:`\mathbf{\Theta}_s` is
``lin_l`` (with its own bias, as in PyG), :math:`\mathbf{\Theta}_t` is
``lin_r``; ``share_weights=True`` uses one matrix for both.

Shapes: ``x`` ``(|V|, F_in)`` or a bipartite pair, ``edge_index`` ``(2, |E|)``
(or an :class:`~gnncore.sparse.Adjacency`: the neighbour sum then runs as CSR
products), ``edge_attr`` ``(|E|, D)`` optional → ``(|V|, H * F_out)`` (concat)
or ``(|V|, F_out)``.
"""

from __future__ import annotations

from typing import ClassVar

import jax
import jax.numpy as jnp
from flax import nnx

from gnncore.inits import glorot, linear, torch_bias, zeros
from gnncore.message_passing import MessagePassing
from gnncore.segment import segment_softmax
from gnncore.sparse import Adjacency, apply_linear, as_dense, spmm, take_edge_rows
from gnncore.utils import (
    _check_fill_value,
    add_self_loops,
    as_edge_index,
    remove_self_loops,
)

__all__ = ["GATv2Conv"]


def _glorot_linear(in_features: int, out_features: int, bias: bool, rngs: nnx.Rngs):
    """PyG's ``Linear(..., weight_initializer="glorot")``: glorot kernel and the
    default (fan-in uniform) bias."""
    return nnx.Linear(in_features, out_features, use_bias=bias, kernel_init=glorot,
                      bias_init=torch_bias(in_features), rngs=rngs)


class GATv2Conv(MessagePassing):
    """GATv2 attention layer (PyG's ``GATv2Conv``).

    Arguments:
        in_features: input size, or ``(F_src, F_dst)`` for a bipartite graph.
        out_features: output size per head.
        heads: number of attention heads ``H``.
        concat: concatenate heads (output ``H * out_features``) or average them.
        negative_slope: LeakyReLU slope inside the attention score.
        dropout: dropout rate on the attention coefficients while training; the
            layer draws masks from its own fork of the ``dropout`` stream.
        add_self_loops: PyG semantics, kept jit-safe: existing self-loops are
            masked out (weight 0) and one loop per node is appended, so the edge
            count stays static. Needs as many source as target nodes.
        edge_dim: size of edge features to include in the attention, or ``None``.
        fill_value: edge feature of the appended self-loops: a number, or a
            reduction of the node's incoming (non-loop) edge features:
            ``"mean"``, ``"add"`` (``"sum"``), ``"max"`` or ``"min"``; a node
            without incoming edges gets 0 (see :func:`gnncore.utils.add_self_loops`).
        bias: learn additive biases (in ``lin_l`` / ``lin_r`` and on the output,
            as in PyG).
        share_weights: apply the same linear map to source and target nodes;
            ``lin_r`` is then the very same module as ``lin_l`` (one set of
            weights in the state).
        residual: add a learnable skip connection ``res(x_dst)`` (no bias).
        rngs: ``nnx.Rngs`` for weights (glorot) and dropout.

    Call ``layer(x, edge_index, edge_attr=None, return_attention_weights=False)``.
    With ``return_attention_weights=True`` it returns ``(out, (edge_index, alpha))``
    where ``alpha`` is ``[E', H]`` over the edges actually used (with
    ``add_self_loops``: the given edges, old self-loops at weight 0, then one
    loop per node), after attention dropout.
    """

    has_heads: ClassVar[bool] = True
    takes_edge_attr: ClassVar[bool] = True

    def __init__(self, in_features: int | tuple[int, int], out_features: int, *,
                 heads: int = 1, concat: bool = True, negative_slope: float = 0.2,
                 dropout: float = 0.0, add_self_loops: bool = True,
                 edge_dim: int | None = None, fill_value: float | str = "mean",
                 bias: bool = True, share_weights: bool = False, residual: bool = False,
                 rngs: nnx.Rngs):
        super().__init__(aggr="sum")
        _check_fill_value(fill_value)
        self.in_features, self.out_features = in_features, out_features
        self.heads, self.concat = heads, concat
        self.negative_slope = negative_slope
        self.add_self_loops, self.edge_dim, self.fill_value = add_self_loops, edge_dim, fill_value
        self.share_weights, self.residual = share_weights, residual
        f_src, f_dst = ((in_features, in_features) if isinstance(in_features, int)
                        else tuple(in_features))
        if share_weights and f_src != f_dst:
            raise ValueError("share_weights=True needs equal source and target feature "
                             f"sizes; got {(f_src, f_dst)}")
        hc = heads * out_features
        self.lin_l = _glorot_linear(f_src, hc, bias, rngs)
        self.lin_r = self.lin_l if share_weights else _glorot_linear(f_dst, hc, bias, rngs)
        self.att = nnx.Param(glorot(rngs.params(), (1, heads, out_features)))
        if edge_dim is not None:
            self.lin_edge = linear(edge_dim, hc, bias=False, init="glorot", rngs=rngs)
        else:
            self.lin_edge = None
        out_dim = hc if concat else out_features
        self.res = (linear(f_dst, out_dim, bias=False, init="glorot", rngs=rngs)
                    if residual else None)
        self.bias = nnx.Param(zeros(rngs.params(), (out_dim,))) if bias else None
        self.dropout = nnx.Dropout(dropout, rngs=rngs) if dropout > 0 else None

    def __call__(self, x, edge_index, edge_attr=None, *,
                 return_attention_weights: bool = False):
        H, C = self.heads, self.out_features
        adj = edge_index if isinstance(edge_index, Adjacency) else None
        edge_index = as_edge_index(edge_index)
        num_edges = edge_index.shape[1]
        x_src, x_dst = x if isinstance(x, (tuple, list)) else (x, x)
        if x_dst is None:
            raise ValueError("GATv2Conv needs target features: pass x=(x_src, x_dst)")
        num_src, num_dst = x_src.shape[0], x_dst.shape[0]
        if self.add_self_loops and num_src != num_dst:
            raise ValueError("add_self_loops needs as many source as target nodes; "
                             "pass add_self_loops=False for a bipartite graph")
        if edge_attr is not None and self.lin_edge is None:
            raise ValueError("edge_attr given, but this GATv2Conv was built without "
                             "edge_dim")
        if self.lin_edge is not None and edge_attr is None:
            raise ValueError("this GATv2Conv was built with edge_dim: pass edge_attr")
        if edge_attr is not None:
            # Explicit sizes: reshape(0, -1) is ambiguous for a graph with no edges.
            edge_attr = edge_attr.reshape(num_edges, self.edge_dim)
        h_src = apply_linear(self.lin_l, x_src).reshape(num_src, H, C)
        if self.share_weights and x_dst is x_src:
            h_dst = h_src
        else:
            h_dst = apply_linear(self.lin_r, x_dst).reshape(num_dst, H, C)

        valid = None
        if self.add_self_loops:
            # PyG: remove_self_loops, then add_self_loops(fill_value=); here the
            # old loops stay in place, masked, so the edge count is static.
            edge_index, edge_attr, valid = remove_self_loops(edge_index, edge_attr)
            edge_index, edge_attr, valid = add_self_loops(
                edge_index, num_dst, edge_weight=edge_attr, fill_value=self.fill_value,
                edge_mask=valid)
        src, dst = edge_index[0], edge_index[1]

        z = take_edge_rows(h_src, src, adj) + take_edge_rows(h_dst, dst, adj)  # [E', H, C]
        if edge_attr is not None:
            z = z + self.lin_edge(edge_attr).reshape(-1, H, C)
        z = jax.nn.leaky_relu(z, self.negative_slope)
        logits = jnp.sum(z * self.att[...], axis=-1)  # [E', H]
        alpha = segment_softmax(logits, dst, num_dst, mask=valid)
        if self.dropout is not None:
            alpha = self.dropout(alpha)

        if adj is None:
            out = self.propagate(edge_index, (h_src, h_dst), alpha=alpha)  # [N, H, C]
        else:
            # The input edges go through the fused kernel; the appended
            # self-loops are a diagonal term (message Θ_s x_i), so the CSR
            # structure is unchanged.
            out = self.propagate(adj, (h_src, h_dst), alpha=alpha[:num_edges])
            if self.add_self_loops:
                out = out + alpha[num_edges:, :, None] * h_src
        out = out.reshape(num_dst, H * C) if self.concat else out.mean(axis=1)
        if self.res is not None:
            out = out + self.res(as_dense(x_dst))
        if self.bias is not None:
            out = out + self.bias[...]
        if return_attention_weights:
            return out, (edge_index, alpha)
        return out

    def message(self, x_j, alpha):
        return alpha[..., None] * x_j

    def message_and_aggregate(self, adj, x_src, x_dst, num_nodes, alpha):
        return spmm(adj, alpha, x_src)

r"""TransformerConv: graph transformer attention (Shi et al., 2021).

.. math::
    \mathbf{m}_i = \Big\Vert_{h=1}^{H} \sum_{j \in \mathcal{N}(i)}
    \alpha^{h}_{i,j}\big(\mathbf{W}^{h}_{v}\mathbf{x}_j
    + \mathbf{W}^{h}_{e}\mathbf{e}_{j,i}\big),
    \qquad
    \alpha^{h}_{i,j} = \operatorname{softmax}_j\bigg(
    \frac{(\mathbf{W}^{h}_{q}\mathbf{x}_i)^{\top}
    (\mathbf{W}^{h}_{k}\mathbf{x}_j + \mathbf{W}^{h}_{e}\mathbf{e}_{j,i})}{\sqrt{d}}\bigg)

with :math:`d` = ``out_features`` (heads averaged instead of concatenated
with ``concat=False``; edge terms only with ``edge_dim``). With
``root_weight`` the skip term :math:`\mathbf{r}_i = \mathbf{W}_r\mathbf{x}_i`
is added:

.. math::
    \mathbf{x}'_i = \mathbf{m}_i + \mathbf{r}_i
    \quad\text{or, with beta,}\quad
    \mathbf{x}'_i = \beta_i\,\mathbf{r}_i + (1 - \beta_i)\,\mathbf{m}_i,
    \quad
    \beta_i = \sigma\big(\mathbf{w}_\beta^{\top}
    [\mathbf{m}_i \,\Vert\, \mathbf{r}_i \,\Vert\, \mathbf{m}_i - \mathbf{r}_i]\big).

The block order of the gate input is the one PyG's code uses (its docstring
shows ``[r, m, r - m]``, the same function family up to a permutation and sign
of :math:`\mathbf{w}_\beta`), so ``lin_beta`` weights transplant from PyG.
No self-loops are added: a node without incoming edges gets
:math:`\mathbf{m}_i = 0`.

Shapes: ``x`` ``(|V|, F_in)`` or a bipartite pair, ``edge_index`` ``(2, |E|)``
(or an :class:`~gnncore.sparse.Adjacency`: the neighbour sum then runs as CSR
products), ``edge_attr`` ``(|E|, D)`` optional → ``(|V|, H * F_out)`` (concat)
or ``(|V|, F_out)``.
"""

from __future__ import annotations

import math
from typing import ClassVar

import jax
import jax.numpy as jnp
from flax import nnx

from gnncore.inits import linear
from gnncore.message_passing import MessagePassing
from gnncore.segment import segment_softmax, segment_sum
from gnncore.sparse import Adjacency, apply_linear, spmm, take_edge_rows
from gnncore.utils import as_edge_index

__all__ = ["TransformerConv"]


class TransformerConv(MessagePassing):
    """Graph transformer layer (PyG's ``TransformerConv``).

    Arguments:
        in_features: input size, or ``(F_src, F_dst)`` for a bipartite graph
            (keys and values read the source features, queries and the skip
            term the target features).
        out_features: output size per head.
        heads: number of attention heads ``H``.
        concat: concatenate heads (output ``H * out_features``) or average them
            (the skip term then has ``out_features`` outputs).
        beta: gate the skip term against the aggregation (see module doc).
            Ignored without ``root_weight``, as in PyG.
        dropout: dropout rate on the attention coefficients while training; the
            layer draws masks from its own fork of the ``dropout`` stream.
        edge_dim: size of edge features, added (projected) to keys and values.
        bias: learn biases in the query, key and value projections
            (``lin_query``, ``lin_key``, ``lin_value``) and in the skip
            projection ``lin_skip``, as in PyG (``bias=bias`` for all four);
            ``lin_edge`` never has one.
        root_weight: add the skip term ``lin_skip(x_dst)``. Unlike PyG, no
            ``lin_skip`` is built without it (PyG builds one it never uses).
        rngs: ``nnx.Rngs`` for weights (torch.nn.Linear init) and dropout.

    Call ``layer(x, edge_index, edge_attr=None, return_attention_weights=False)``.
    With ``return_attention_weights=True`` it returns ``(out, (edge_index, alpha))``
    with ``alpha`` ``[E, H]`` in the order of ``edge_index`` (after attention
    dropout).
    """

    has_heads: ClassVar[bool] = True
    takes_edge_attr: ClassVar[bool] = True

    def __init__(self, in_features: int | tuple[int, int], out_features: int, *,
                 heads: int = 1, concat: bool = True, beta: bool = False,
                 dropout: float = 0.0, edge_dim: int | None = None, bias: bool = True,
                 root_weight: bool = True, rngs: nnx.Rngs):
        super().__init__(aggr="sum")
        self.in_features, self.out_features = in_features, out_features
        self.heads, self.concat = heads, concat
        self.beta = bool(beta and root_weight)
        self.edge_dim, self.root_weight = edge_dim, root_weight
        f_src, f_dst = ((in_features, in_features) if isinstance(in_features, int)
                        else tuple(in_features))
        hc = heads * out_features
        self.lin_key = linear(f_src, hc, bias=bias, rngs=rngs)
        self.lin_query = linear(f_dst, hc, bias=bias, rngs=rngs)
        self.lin_value = linear(f_src, hc, bias=bias, rngs=rngs)
        self.lin_edge = (linear(edge_dim, hc, bias=False, rngs=rngs)
                         if edge_dim is not None else None)
        out_dim = hc if concat else out_features
        self.lin_skip = linear(f_dst, out_dim, bias=bias, rngs=rngs) if root_weight else None
        self.lin_beta = linear(3 * out_dim, 1, bias=False, rngs=rngs) if self.beta else None
        self.dropout = nnx.Dropout(dropout, rngs=rngs) if dropout > 0 else None

    def __call__(self, x, edge_index, edge_attr=None, *,
                 return_attention_weights: bool = False):
        H, C = self.heads, self.out_features
        adj = edge_index if isinstance(edge_index, Adjacency) else None
        edge_index = as_edge_index(edge_index)
        num_edges = edge_index.shape[1]
        x_src, x_dst = x if isinstance(x, (tuple, list)) else (x, x)
        if x_dst is None:
            raise ValueError("TransformerConv needs target features: pass x=(x_src, x_dst)")
        num_src, num_dst = x_src.shape[0], x_dst.shape[0]
        if edge_attr is not None and self.lin_edge is None:
            raise ValueError("edge_attr given, but this TransformerConv was built without "
                             "edge_dim")
        if self.lin_edge is not None and edge_attr is None:
            raise ValueError("this TransformerConv was built with edge_dim: pass edge_attr")
        query = apply_linear(self.lin_query, x_dst).reshape(num_dst, H, C)
        key = apply_linear(self.lin_key, x_src).reshape(num_src, H, C)
        value = apply_linear(self.lin_value, x_src).reshape(num_src, H, C)
        edge = None
        if edge_attr is not None:
            # Explicit sizes: reshape(0, -1) is ambiguous for a graph with no edges.
            edge = self.lin_edge(edge_attr.reshape(num_edges, self.edge_dim))
            edge = edge.reshape(num_edges, H, C)
        src, dst = edge_index[0], edge_index[1]

        key_j = take_edge_rows(key, src, adj)
        if edge is not None:
            key_j = key_j + edge
        query_i = take_edge_rows(query, dst, adj, indices_are_sorted=True)
        logits = jnp.sum(query_i * key_j, axis=-1) / math.sqrt(C)
        alpha = segment_softmax(logits, dst, num_dst, indices_are_sorted=adj is not None)
        if self.dropout is not None:
            alpha = self.dropout(alpha)

        out = self.propagate(edge_index if adj is None else adj, (value, None),
                             size=(num_src, num_dst), alpha=alpha, edge=edge)  # [N, H, C]
        out = out.reshape(num_dst, H * C) if self.concat else out.mean(axis=1)
        if self.lin_skip is not None:
            root = apply_linear(self.lin_skip, x_dst)
            if self.lin_beta is not None:
                gate = jax.nn.sigmoid(
                    self.lin_beta(jnp.concatenate([out, root, out - root], axis=-1)))
                out = gate * root + (1.0 - gate) * out
            else:
                out = out + root
        if return_attention_weights:
            return out, (edge_index, alpha)
        return out

    def message(self, x_j, alpha, edge=None):
        if edge is not None:
            x_j = x_j + edge
        return alpha[..., None] * x_j

    def message_and_aggregate(self, adj, x_src, x_dst, num_nodes, alpha, edge=None):
        out = spmm(adj, alpha, x_src)
        if edge is not None:
            out = out + segment_sum(alpha[..., None] * edge, adj.edge_index[1], num_nodes,
                                    indices_are_sorted=True)
        return out

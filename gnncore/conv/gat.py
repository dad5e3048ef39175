r"""GATConv: graph attention (Veličković et al., 2018).

.. math::
    \mathbf{x}'_i = \Big\Vert_{h=1}^{H} \sum_{j \in \mathcal{N}(i) \cup \{i\}}
    \alpha^{h}_{i,j} \mathbf{\Theta}^{h} \mathbf{x}_j + \mathbf{b},
    \qquad
    \alpha^{h}_{i,j} = \operatorname{softmax}_j\Big(\operatorname{LeakyReLU}\big(
    \mathbf{a}^{h\top}_{s} \mathbf{\Theta}^{h}\mathbf{x}_j
    + \mathbf{a}^{h\top}_{t} \mathbf{\Theta}^{h}\mathbf{x}_i
    + \mathbf{a}^{h\top}_{e} \mathbf{\Theta}^{h}_{e}\mathbf{e}_{j,i}\big)\Big)

(heads averaged instead of concatenated with ``concat=False``).

Shapes: ``x`` ``(|V|, F_in)`` or a bipartite pair, ``edge_index`` ``(2, |E|)``
(or an :class:`~gnncore.sparse.Adjacency`: the neighbour sum then runs as CSR
products),
``edge_attr`` ``(|E|, D)`` optional → ``(|V|, H * F_out)`` (concat) or
``(|V|, F_out)``.
"""

from __future__ import annotations

from typing import ClassVar

import jax
import jax.numpy as jnp
from flax import nnx

from gnncore.inits import glorot, linear, zeros
from gnncore.message_passing import MessagePassing
from gnncore.segment import segment_softmax
from gnncore.sparse import Adjacency, apply_linear, spmm, take_rows
from gnncore.utils import (
    _check_fill_value,
    add_self_loops,
    as_edge_index,
    remove_self_loops,
)

__all__ = ["GATConv"]


class GATConv(MessagePassing):
    """Graph attention layer (PyG's ``GATConv``).

    Arguments:
        in_features: input size, or ``(F_src, F_dst)`` for a bipartite graph.
        out_features: output size per head.
        heads: number of attention heads ``H``.
        concat: concatenate heads (output ``H * out_features``) or average them.
        negative_slope: LeakyReLU slope in the attention logits.
        dropout: dropout rate on the attention coefficients while training; the
            layer draws masks from its own fork of the ``dropout`` stream.
        add_self_loops: PyG semantics, kept jit-safe: existing self-loops are
            masked out (weight 0) and one loop per node is appended, so the edge
            count stays static.
        edge_dim: size of edge features to include in the attention, or ``None``.
        fill_value: edge feature of the appended self-loops: a number, or a
            reduction of the node's incoming (non-loop) edge features:
            ``"mean"``, ``"add"`` (``"sum"``), ``"max"`` or ``"min"``; a node
            without incoming edges gets 0 (see :func:`gnncore.utils.add_self_loops`).
        bias: learn an additive bias.
        rngs: ``nnx.Rngs`` for weights (glorot) and dropout.

    Call ``layer(x, edge_index, edge_attr=None, return_attention_weights=False)``.
    With ``return_attention_weights=True`` it returns ``(out, (edge_index, alpha))``
    where ``alpha`` is ``[E', H]`` over the edges actually used (including the
    appended self-loops; masked old loops have weight 0).
    """

    has_heads: ClassVar[bool] = True
    takes_edge_attr: ClassVar[bool] = True

    def __init__(self, in_features: int | tuple[int, int], out_features: int, *,
                 heads: int = 1, concat: bool = True, negative_slope: float = 0.2,
                 dropout: float = 0.0, add_self_loops: bool = True,
                 edge_dim: int | None = None, fill_value: float | str = "mean",
                 bias: bool = True, rngs: nnx.Rngs):
        super().__init__(aggr="sum")
        _check_fill_value(fill_value)
        self.in_features, self.out_features = in_features, out_features
        self.heads, self.concat = heads, concat
        self.negative_slope = negative_slope
        self.add_self_loops, self.edge_dim, self.fill_value = add_self_loops, edge_dim, fill_value
        hc = heads * out_features
        if isinstance(in_features, int):
            self.lin = linear(in_features, hc, bias=False, init="glorot", rngs=rngs)
            self.lin_src = self.lin_dst = None
        else:
            self.lin = None
            self.lin_src = linear(in_features[0], hc, bias=False, init="glorot", rngs=rngs)
            self.lin_dst = linear(in_features[1], hc, bias=False, init="glorot", rngs=rngs)
        self.att_src = nnx.Param(glorot(rngs.params(), (1, heads, out_features)))
        self.att_dst = nnx.Param(glorot(rngs.params(), (1, heads, out_features)))
        if edge_dim is not None:
            self.lin_edge = linear(edge_dim, hc, bias=False, init="glorot", rngs=rngs)
            self.att_edge = nnx.Param(glorot(rngs.params(), (1, heads, out_features)))
        else:
            self.lin_edge, self.att_edge = None, None
        out_dim = hc if concat else out_features
        self.bias = nnx.Param(zeros(rngs.params(), (out_dim,))) if bias else None
        self.dropout = nnx.Dropout(dropout, rngs=rngs) if dropout > 0 else None

    def __call__(self, x, edge_index, edge_attr=None, *,
                 return_attention_weights: bool = False):
        H, C = self.heads, self.out_features
        # Attention logits and their softmax are per edge; with an Adjacency the
        # weighted sum of neighbours then runs as CSR products (see below).
        adj = edge_index if isinstance(edge_index, Adjacency) else None
        edge_index = as_edge_index(edge_index)
        if isinstance(x, (tuple, list)):
            x_src_in, x_dst_in = x
            lin_src = self.lin_src if self.lin is None else self.lin
            lin_dst = self.lin_dst if self.lin is None else self.lin
            if x_dst_in is None:
                raise ValueError("GATConv needs target features: pass x=(x_src, x_dst)")
            flat_src = apply_linear(lin_src, x_src_in)  # [N_src, H * C]
            flat_dst = apply_linear(lin_dst, x_dst_in)
            a_src = flat_src @ self._attention_matrix(self.att_src)  # [N_src, H]
            a_dst = flat_dst @ self._attention_matrix(self.att_dst)  # [N_dst, H]
            h_src = flat_src.reshape(x_src_in.shape[0], H, C)
            h_dst = flat_dst.reshape(x_dst_in.shape[0], H, C)
        else:
            if self.lin is None:
                raise ValueError("this GATConv was built for a bipartite input: pass "
                                 "x=(x_src, x_dst)")
            flat = apply_linear(self.lin, x)  # [N, H * C]
            both = flat @ self._attention_matrix(self.att_src, self.att_dst)
            a_src, a_dst = both[:, :H], both[:, H:]  # [N, H] each
            h_src = h_dst = flat.reshape(x.shape[0], H, C)
        num_dst = h_dst.shape[0]

        if self.add_self_loops and h_src.shape[0] != num_dst:
            raise ValueError("add_self_loops needs as many source as target nodes; "
                             "pass add_self_loops=False for a bipartite graph")
        if self.lin_edge is not None and edge_attr is None:
            raise ValueError("this GATConv was built with edge_dim: pass edge_attr")
        if adj is not None:
            out, attention = self._attend_csr(adj, h_src, h_dst, a_src, a_dst, edge_attr,
                                              return_attention_weights)
        else:
            out, attention = self._attend_edges(edge_index, h_src, h_dst, a_src, a_dst,
                                                edge_attr)
        out = out.reshape(num_dst, H * C) if self.concat else out.mean(axis=1)
        if self.bias is not None:
            out = out + self.bias[...]
        if return_attention_weights:
            return out, attention
        return out

    def _attention_matrix(self, *atts):
        """``[H * C, H * len(atts)]``: each attention vector as a block-diagonal
        matrix, so that ``h.reshape(N, H * C) @ matrix`` gives
        ``sum(h.reshape(N, H, C) * att, -1)``, one ``[N, H]`` block per vector:
        a small matrix product instead of a reduction over the ``[N, H, C]``
        features (XLA's CPU reductions were a quarter of a GAT training step).
        It multiplies the layer's output ``h``, not its input, so its cost does
        not grow with the input width (the attention vector folded into the
        input's weights, ``x @ (W a)``, multiplied every input feature again:
        0.8x PyG's step on Cora's 1433 dense features)."""
        H, C = self.heads, self.out_features
        blocks = []
        for att in atts:
            a = att[...][0]  # [H, C]
            blocks.append((a[:, :, None] * jnp.eye(H, dtype=a.dtype)[:, None, :])
                          .reshape(H * C, H))
        return blocks[0] if len(blocks) == 1 else jnp.concatenate(blocks, 1)

    def _edge_kernel(self):
        """``[D, H]``: the edge attention vector folded into ``lin_edge``'s weights,
        ``e @ kernel == sum((e @ W).reshape(E, H, C) * att_edge, -1)``. Unlike the
        node features' ``h``, ``e @ W`` is needed nowhere else, so the fold (``D x H``
        per edge) is cheaper than computing it (``D x H x C``)."""
        w = self.lin_edge.kernel[...]
        return jnp.einsum("fhc,hc->fh", w.reshape(w.shape[0], self.heads, self.out_features),
                          self.att_edge[...][0])

    def _self_loops(self, edge_index, edge_attr, num_nodes):
        """PyG: remove_self_loops, then add_self_loops(fill_value=); here the old
        loops stay in place, masked (``valid``), so the edge count is static."""
        edge_index, edge_attr, valid = remove_self_loops(edge_index, edge_attr)
        return add_self_loops(edge_index, num_nodes, edge_weight=edge_attr,
                              fill_value=self.fill_value, edge_mask=valid)

    def _edge_logits(self, edge_attr):
        """The edge features' share of the attention logits, ``[E, H]`` (the
        fold of :meth:`_edge_kernel`; ``lin_edge`` has no bias)."""
        # Explicit sizes: reshape(0, -1) is ambiguous for a graph with no edges.
        e = edge_attr.reshape(edge_attr.shape[0], self.edge_dim)
        return e @ self._edge_kernel()

    def _attend_edges(self, edge_index, h_src, h_dst, a_src, a_dst, edge_attr):
        """A plain ``edge_index``: a softmax over the edges' target segments and a
        scatter of ``alpha * x_j``."""
        num_dst = h_dst.shape[0]
        valid = None
        if self.add_self_loops:
            edge_index, edge_attr, valid = self._self_loops(edge_index, edge_attr, num_dst)
        src, dst = edge_index[0], edge_index[1]
        logits = a_src[src] + a_dst[dst]  # [E', H]
        if self.lin_edge is not None:
            logits = logits + self._edge_logits(edge_attr)
        logits = jax.nn.leaky_relu(logits, self.negative_slope)
        alpha = segment_softmax(logits, dst, num_dst, mask=valid)
        if self.dropout is not None:
            alpha = self.dropout(alpha)
        out = self.propagate(edge_index, (h_src, h_dst), alpha=alpha)  # [N, H, C]
        return out, (edge_index, alpha)

    def _attend_csr(self, adj, h_src, h_dst, a_src, a_dst, edge_attr, want_alpha):
        """An :class:`~gnncore.sparse.Adjacency`: the same maths in fewer passes
        over the edges. Its edges are sorted by target, so the softmax's segment
        max and sum run on sorted segments; the appended self-loops are a
        per-node term (one logit per node, no ``E + N`` concatenation); and the
        softmax is normalised after the CSR product, one divide per node and
        head instead of one per edge."""
        num_dst, num_edges = adj.num_dst, adj.num_edges
        src, dst = adj.edge_index[0], adj.edge_index[1]
        valid = loop_logits = None
        if self.add_self_loops:
            loop_index, edge_attr, valid = self._self_loops(adj.edge_index, edge_attr, num_dst)
            valid = valid[:num_edges]  # old loops: masked, as on the edge_index path
            loop_logits = a_src[:num_dst] + a_dst  # [N, H]
        logits = take_rows(a_src, src) + take_rows(a_dst, dst, indices_are_sorted=True)  # [E, H]
        if self.lin_edge is not None:
            e = self._edge_logits(edge_attr)  # [E (+ N), H]
            logits = logits + e[:num_edges]
            if loop_logits is not None:
                loop_logits = loop_logits + e[num_edges:]
        logits = jax.nn.leaky_relu(logits, self.negative_slope)
        if valid is not None:
            logits = jnp.where(valid[:, None], logits, -jnp.inf)
        peak = jax.ops.segment_max(logits, dst, num_dst, indices_are_sorted=True)
        if loop_logits is not None:
            loop_logits = jax.nn.leaky_relu(loop_logits, self.negative_slope)
            peak = jnp.maximum(peak, loop_logits)
        # Empty segments have max -inf; any finite shift works there.
        peak = jax.lax.stop_gradient(jnp.where(jnp.isfinite(peak), peak, 0.0))
        weight = jnp.exp(logits - take_rows(peak, dst, indices_are_sorted=True))  # 0 if masked
        total = jax.ops.segment_sum(weight, dst, num_dst, indices_are_sorted=True)
        loop_weight = None
        if loop_logits is not None:
            loop_weight = jnp.exp(loop_logits - peak)
            total = total + loop_weight
        total = jnp.where(total > 0, total, 1.0)
        if self.dropout is not None and not self.dropout.deterministic:
            # one mask over [E + N, H], the edge_index path's shape: the same draws
            if loop_weight is None:
                weight = self.dropout(weight)
            else:
                both = self.dropout(jnp.concatenate([weight, loop_weight]))
                weight, loop_weight = both[:num_edges], both[num_edges:]
        out = self.propagate(adj, (h_src, h_dst), alpha=weight)  # [N, H, C]
        if loop_weight is not None:
            out = out + loop_weight[:, :, None] * h_src[:num_dst]  # x_j of loop i→i
        out = out / total[:, :, None]
        if not want_alpha:
            return out, None
        alpha = weight / take_rows(total, dst, indices_are_sorted=True)
        edge_index = adj.edge_index
        if loop_weight is not None:
            alpha = jnp.concatenate([alpha, loop_weight / total])
            edge_index = loop_index
        return out, (edge_index, alpha)

    def message(self, x_j, alpha):
        return alpha[..., None] * x_j

    def message_and_aggregate(self, adj, x_src, x_dst, num_nodes, alpha):
        return spmm(adj, alpha, x_src)

r"""GINConv: the graph isomorphism network layer (Xu et al., 2019).

.. math::
    \mathbf{x}'_i = h_{\mathbf{\Theta}}\Big((1 + \epsilon)\,\mathbf{x}_i +
    \sum_{j \in \mathcal{N}(i)} \mathbf{x}_j\Big)

Shapes: ``x`` ``(|V|, F_in)`` or a bipartite pair, ``edge_index`` ``(2, |E|)``
or an :class:`~gnncore.sparse.Adjacency` (fused CSR kernel for sum/mean)
→ ``(|V|, F_out)``.
"""

from __future__ import annotations

from collections.abc import Callable

import jax.numpy as jnp
from flax import nnx

from gnncore.message_passing import MessagePassing
from gnncore.mlp import MLP  # also importable from here, its former home
from gnncore.sparse import as_dense, spmm

__all__ = ["GINConv"]


class GINConv(MessagePassing):
    """Graph isomorphism layer (PyG's ``GINConv``).

    Arguments:
        in_features: input size ``F_in``.
        out_features: output size ``F_out``.
        nn: the network :math:`h_\\Theta` applied after aggregation. By default an
            :class:`MLP` ``[F_in, hidden_features, F_out]``; a custom module must
            map ``F_in`` to ``F_out``.
        hidden_features: hidden width of the default MLP (default ``F_out``).
        eps: initial :math:`\\epsilon`.
        train_eps: learn :math:`\\epsilon` as a parameter.
        rngs: ``nnx.Rngs`` for the default MLP.
    """

    def __init__(self, in_features: int, out_features: int, *,
                 nn: Callable | None = None, hidden_features: int | None = None,
                 eps: float = 0.0, train_eps: bool = False, rngs: nnx.Rngs):
        super().__init__(aggr="sum")
        self.in_features, self.out_features = in_features, out_features
        if nn is None:
            nn = MLP([in_features, hidden_features or out_features, out_features], rngs=rngs)
        self.nn = nn
        self.train_eps = train_eps
        self.eps = nnx.Param(jnp.asarray(eps, jnp.float32)) if train_eps else float(eps)

    def __call__(self, x, edge_index):
        x_src, x_dst = x if isinstance(x, (tuple, list)) else (x, x)
        x_src, x_dst = as_dense(x_src), as_dense(x_dst)  # GIN sums raw features
        out = self.propagate(edge_index, (x_src, x_dst))
        eps = self.eps[...] if self.train_eps else self.eps
        return self.nn(out + (1.0 + eps) * x_dst)

    def message_and_aggregate(self, adj, x_src, x_dst, num_nodes):
        return spmm(adj, None, x_src)

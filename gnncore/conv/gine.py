r"""GINEConv: GIN with edge features (Hu et al., 2020, "Strategies for
Pre-training Graph Neural Networks").

.. math::
    \mathbf{x}'_i = h_{\mathbf{\Theta}}\Big((1 + \epsilon)\,\mathbf{x}_i +
    \sum_{j \in \mathcal{N}(i)} \operatorname{ReLU}\big(\mathbf{x}_j +
    \mathbf{e}_{j,i}\big)\Big)

where :math:`\mathbf{e}_{j,i}` is the feature vector of edge :math:`j \to i`,
first mapped to ``F_in`` by a linear layer when ``edge_dim`` is given.

Shapes: ``x`` ``(|V|, F_in)`` or a bipartite pair (both sides ``F_in``),
``edge_index`` ``(2, |E|)`` or an :class:`~gnncore.sparse.Adjacency`,
``edge_attr`` ``(|E|, D)`` (required; ``D = F_in`` unless ``edge_dim`` is set)
→ ``(|V|, F_out)``. The ReLU acts per edge, so there is no fused CSR kernel: an
``Adjacency`` only contributes its (target-sorted) edge list, and ``edge_attr``
must follow that edge order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

import jax.numpy as jnp
from flax import nnx

from gnncore.inits import linear
from gnncore.message_passing import MessagePassing
from gnncore.mlp import MLP
from gnncore.sparse import as_dense

__all__ = ["GINEConv"]


class GINEConv(MessagePassing):
    """Graph isomorphism layer with edge features (PyG's ``GINEConv``).

    Arguments:
        in_features: input size ``F_in``.
        out_features: output size ``F_out``.
        nn: the network :math:`h_\\Theta` applied after aggregation. By default an
            :class:`~gnncore.mlp.MLP` ``[F_in, hidden_features, F_out]``; a
            custom module must map ``F_in`` to ``F_out``.
        hidden_features: hidden width of the default MLP (default ``F_out``).
        eps: initial :math:`\\epsilon`.
        train_eps: learn :math:`\\epsilon` as a (scalar) parameter.
        edge_dim: width ``D`` of ``edge_attr``. If given, a linear layer ``lin``
            (``D → F_in``, with bias) maps the edge features to the node width,
            as in PyG (also when ``D == F_in``). If ``None``, ``edge_attr`` must
            already have ``F_in`` columns.
        rngs: ``nnx.Rngs`` for the default MLP and ``lin``.
    """

    takes_edge_attr: ClassVar[bool] = True

    def __init__(self, in_features: int, out_features: int, *,
                 nn: Callable | None = None, hidden_features: int | None = None,
                 eps: float = 0.0, train_eps: bool = False, edge_dim: int | None = None,
                 rngs: nnx.Rngs):
        super().__init__(aggr="sum")
        self.in_features, self.out_features = in_features, out_features
        if nn is None:
            nn = MLP([in_features, hidden_features or out_features, out_features], rngs=rngs)
        self.nn = nn
        self.train_eps = train_eps
        self.eps = nnx.Param(jnp.asarray(eps, jnp.float32)) if train_eps else float(eps)
        self.edge_dim = edge_dim
        self.lin = linear(edge_dim, in_features, rngs=rngs) if edge_dim is not None else None

    def __call__(self, x, edge_index, edge_attr=None):
        """Arguments: ``x`` ``[N, F_in]`` or ``(x_src, x_dst)``; ``edge_index``
        ``[2, E]`` or an ``Adjacency``; ``edge_attr`` ``[E, D]`` (required)."""
        if edge_attr is None:
            raise ValueError(
                "GINEConv needs edge_attr (one feature row per edge): every message is "
                "ReLU(x_j + e_ji); use GINConv for graphs without edge features")
        x_src, x_dst = x if isinstance(x, (tuple, list)) else (x, x)
        x_src, x_dst = as_dense(x_src), as_dense(x_dst)  # GINE sums raw features
        if self.lin is not None:
            edge_attr = self.lin(edge_attr)
        elif edge_attr.ndim != 2 or edge_attr.shape[-1] != x_src.shape[-1]:
            raise ValueError(
                f"GINEConv: edge_attr has shape {tuple(edge_attr.shape)} but the node "
                f"features have {x_src.shape[-1]} columns; pass edge_dim=<edge feature "
                "width> so that a linear layer maps edge_attr to the node width")
        out = self.propagate(edge_index, (x_src, x_dst), edge_attr=edge_attr)
        eps = self.eps[...] if self.train_eps else self.eps
        return self.nn(out + (1.0 + eps) * x_dst)

    def message(self, x_j, edge_attr):
        return nnx.relu(x_j + edge_attr)

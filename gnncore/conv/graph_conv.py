r"""GraphConv: the higher-order GNN layer of Morris et al. (2019, "Weisfeiler
and Leman Go Neural").

.. math::
    \mathbf{x}'_i = \mathbf{W}_1 \mathbf{x}_i + \mathbf{W}_2
    \bigoplus_{j \in \mathcal{N}(i)} e_{j,i} \cdot \mathbf{x}_j + \mathbf{b}

:math:`\bigoplus` is the aggregation (sum by default; mean, max or min), and
:math:`e_{j,i}` the weight of edge :math:`j \to i` (1 without
``edge_weight``). The bias belongs to :math:`\mathbf{W}_2` (PyG's ``lin_rel``);
:math:`\mathbf{W}_1` (``lin_root``) has none. Mean divides by the number of
incoming edges, not by their total weight (as in PyG).

Shapes: ``x`` ``(|V|, F_in)`` or a bipartite pair ``((|V_s|, F_s), (|V_t|,
F_t))``, ``edge_index`` ``(2, |E|)`` or an :class:`~gnncore.sparse.Adjacency`
(fused CSR kernel for sum/mean), ``edge_weight`` ``(|E|,)`` optional →
``(|V_t|, F_out)``.
"""

from __future__ import annotations

from typing import ClassVar

import jax.numpy as jnp
from flax import nnx

from gnncore.inits import linear
from gnncore.message_passing import MessagePassing
from gnncore.sparse import Adjacency, apply_linear, as_dense, spmm

__all__ = ["GraphConv"]


class GraphConv(MessagePassing):
    """Weisfeiler-Leman GNN layer (PyG's ``GraphConv``).

    Arguments:
        in_features: input size, or ``(F_src, F_dst)`` for a bipartite graph.
        out_features: output size.
        aggr: ``"add"`` (default; alias ``"sum"``), ``"mean"``, ``"max"`` or
            ``"min"``. Empty neighbourhoods aggregate to 0.
        bias: bias of ``lin_rel`` (``lin_root`` has none, as in PyG).
        rngs: ``nnx.Rngs`` for the weights (torch.nn.Linear's init).
    """

    takes_edge_weight: ClassVar[bool] = True

    def __init__(self, in_features: int | tuple[int, int], out_features: int, *,
                 aggr: str = "add", bias: bool = True, rngs: nnx.Rngs):
        super().__init__(aggr=aggr)
        in_src, in_dst = ((in_features, in_features) if isinstance(in_features, int)
                          else in_features)
        self.in_features, self.out_features = in_features, out_features
        self.lin_rel = linear(in_src, out_features, bias=bias, rngs=rngs)
        self.lin_root = linear(in_dst, out_features, bias=False, rngs=rngs)

    def __call__(self, x, edge_index, edge_weight=None, *,
                 size: tuple[int, int] | None = None):
        """Arguments: ``x`` ``[N, F]`` or ``(x_src, x_dst)``; ``edge_index``
        ``[2, E]`` or an ``Adjacency``; ``edge_weight`` ``[E]`` or ``None``.

        With ``x=(x_src, None)`` the root term is skipped (as in PyG) and the
        number of targets comes from ``size=(num_src, num_dst)`` or from the
        ``Adjacency``.
        """
        x_src, x_dst = x if isinstance(x, (tuple, list)) else (x, x)
        if size is None:
            if x_dst is not None:
                size = (x_src.shape[0], x_dst.shape[0])
            elif isinstance(edge_index, Adjacency):
                size = (edge_index.num_src, edge_index.num_dst)
            else:
                raise ValueError("GraphConv: with x=(x_src, None) pass size=(num_src, "
                                 "num_dst) or an Adjacency")
        if self.aggr in ("sum", "add", "mean") and self.out_features < x_src.shape[1]:
            # W_2 commutes with a (weighted) sum or mean: shrink the features
            # before the scatter, the expensive part; the bias comes after.
            h = x_src @ self.lin_rel.kernel[...]
            out = self.propagate(edge_index, (h, None), size=size, edge_weight=edge_weight)
            if self.lin_rel.bias is not None:
                out = out + self.lin_rel.bias[...]
        else:
            out = self.lin_rel(self.propagate(edge_index, (as_dense(x_src), None), size=size,
                                              edge_weight=edge_weight))
        if x_dst is not None:
            out = out + apply_linear(self.lin_root, x_dst)
        return out

    def message(self, x_j, edge_weight=None):
        return x_j if edge_weight is None else edge_weight[:, None] * x_j

    def message_and_aggregate(self, adj, x_src, x_dst, num_nodes, edge_weight=None):
        out = spmm(adj, edge_weight, x_src)
        if self.aggr == "mean":
            out = out / jnp.maximum(adj.in_degree(), 1.0)[:, None]
        return out

r"""SAGEConv: GraphSAGE (Hamilton et al., 2017).

.. math::
    \mathbf{x}'_i = \mathbf{W}_1 \mathbf{x}_i + \mathbf{W}_2 \cdot
    \operatorname{aggr}_{j \in \mathcal{N}(i)} \mathbf{x}_j

with optional L2 normalisation of the output.

Shapes: ``x`` ``(|V|, F_in)`` or a bipartite pair, ``edge_index`` ``(2, |E|)``
or an :class:`~gnncore.sparse.Adjacency` (fused CSR kernel for sum/mean)
→ ``(|V|, F_out)``.
"""

from __future__ import annotations

import jax.numpy as jnp
from flax import nnx

from gnncore.inits import linear
from gnncore.message_passing import MessagePassing
from gnncore.sparse import apply_linear, as_dense, spmm

__all__ = ["SAGEConv"]


class SAGEConv(MessagePassing):
    """GraphSAGE layer (PyG's ``SAGEConv``).

    Arguments:
        in_features: input size, or ``(F_src, F_dst)`` for a bipartite graph.
        out_features: output size.
        aggr: ``"mean"`` (default), ``"max"``, ``"sum"`` or ``"min"``.
        normalize: L2-normalise each output row.
        root_weight: add the transformed target features ``W_1 x_i``.
        project: first apply ``relu(Linear(x))`` to the source features (PyG's
            ``project``).
        bias: bias of ``W_2`` (``W_1`` has none, as in PyG).
        rngs: ``nnx.Rngs`` for the weights (torch.nn.Linear's init).
    """

    def __init__(self, in_features: int | tuple[int, int], out_features: int, *,
                 aggr: str = "mean", normalize: bool = False, root_weight: bool = True,
                 project: bool = False, bias: bool = True, rngs: nnx.Rngs):
        super().__init__(aggr=aggr)
        in_src, in_dst = ((in_features, in_features) if isinstance(in_features, int)
                          else in_features)
        self.in_features, self.out_features = in_features, out_features
        self.normalize, self.root_weight = normalize, root_weight
        self.lin = linear(in_src, in_src, bias=True, rngs=rngs) if project else None
        self.lin_l = linear(in_src, out_features, bias=bias, rngs=rngs)
        self.lin_r = linear(in_dst, out_features, bias=False, rngs=rngs) if root_weight else None

    def __call__(self, x, edge_index):
        x_src, x_dst = x if isinstance(x, (tuple, list)) else (x, x)
        if self.lin is not None:
            x_src = nnx.relu(apply_linear(self.lin, x_src))
        size = (x_src.shape[0], x_dst.shape[0]) if x_dst is not None else None
        if size is None:
            raise ValueError("SAGEConv needs target features: pass x=(x_src, x_dst)")
        if self.aggr in ("sum", "add", "mean") and self.lin_l.out_features < x_src.shape[1]:
            # Linear maps commute with sum/mean: shrink the features before the
            # scatter, which is the expensive part (bias added after aggregation).
            kernel = self.lin_l.kernel[...]
            out = self.propagate(edge_index, (x_src @ kernel, None), size=size)
            if self.lin_l.bias is not None:
                out = out + self.lin_l.bias[...]
        else:
            out = self.lin_l(self.propagate(edge_index, (as_dense(x_src), None), size=size))
        return self.combine(out, x_dst)

    def combine(self, out, x_dst):
        """The aggregated neighbours ``out`` plus the root term, normalised if
        asked: the end of the update (also run by ``gnncore.partition``, which
        aggregates across devices itself)."""
        if self.lin_r is not None:
            out = out + apply_linear(self.lin_r, x_dst)
        if self.normalize:
            norm = jnp.sqrt(jnp.sum(out * out, axis=-1, keepdims=True))
            out = out / jnp.maximum(norm, 1e-12)
        return out

    def message_and_aggregate(self, adj, x_src, x_dst, num_nodes):
        out = spmm(adj, None, x_src)
        if self.aggr == "mean":
            out = out / jnp.maximum(adj.in_degree(), 1.0)[:, None]
        return out

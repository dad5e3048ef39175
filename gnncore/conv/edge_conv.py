r"""EdgeConv: the edge convolution of DGCNN (Wang et al., 2019, "Dynamic Graph
CNN for Learning on Point Clouds").

.. math::
    \mathbf{x}'_i = \bigoplus_{j \in \mathcal{N}(i)}
    h_{\mathbf{\Theta}}\big(\mathbf{x}_i \,\Vert\, \mathbf{x}_j - \mathbf{x}_i\big)

:math:`\Vert` is concatenation and :math:`\bigoplus` the aggregation (max by
default). A node without incoming edges gets 0 (gnncore's aggregation
convention, also PyG's).

Shapes: ``x`` ``(|V|, F_in)`` or a bipartite pair (both sides ``F_in``),
``edge_index`` ``(2, |E|)`` or an :class:`~gnncore.sparse.Adjacency` →
``(|V_t|, F_out)``. :math:`h_\Theta` runs once per edge, so there is no fused
CSR kernel: an ``Adjacency`` only contributes its edge list.
"""

from __future__ import annotations

from collections.abc import Callable

import jax.numpy as jnp

from gnncore.message_passing import MessagePassing
from gnncore.sparse import as_dense

__all__ = ["EdgeConv"]


class EdgeConv(MessagePassing):
    """Edge convolution (PyG's ``EdgeConv``).

    Arguments:
        nn: the network :math:`h_\\Theta`, any callable (typically an
            ``nnx.Module``, e.g. :class:`~gnncore.mlp.MLP`
            ``[2 * F_in, hidden, F_out]``) mapping ``[E, 2 * F_in]`` to
            ``[E, F_out]``.
        aggr: ``"max"`` (default), ``"sum"`` (alias ``"add"``), ``"mean"`` or
            ``"min"``.
    """

    def __init__(self, nn: Callable, *, aggr: str = "max"):
        super().__init__(aggr=aggr)
        self.nn = nn

    def __call__(self, x, edge_index):
        """Arguments: ``x`` ``[N, F_in]`` or ``(x_src, x_dst)``; ``edge_index``
        ``[2, E]`` or an ``Adjacency``."""
        x_src, x_dst = x if isinstance(x, (tuple, list)) else (x, x)
        if x_dst is None:
            raise ValueError("EdgeConv needs target features: pass x=(x_src, x_dst)")
        x_src, x_dst = as_dense(x_src), as_dense(x_dst)
        if x_src.shape[-1] != x_dst.shape[-1]:
            raise ValueError(
                f"EdgeConv computes x_j - x_i: source and target features need the same "
                f"width, got {x_src.shape[-1]} and {x_dst.shape[-1]}")
        return self.propagate(edge_index, (x_src, x_dst))

    def message(self, x_i, x_j):
        return self.nn(jnp.concatenate([x_i, x_j - x_i], axis=-1))

r"""APPNP: approximate personalized propagation of neural predictions
(Klicpera et al., 2019).

.. math::
    \mathbf{X}^{(0)} = \mathbf{H}, \qquad
    \mathbf{X}^{(k+1)} = (1 - \alpha)\, \hat{\mathbf{A}}_{\text{norm}}
    \mathbf{X}^{(k)} + \alpha \mathbf{H}, \qquad
    \mathbf{X}' = \mathbf{X}^{(K)}

with :math:`\hat{\mathbf{A}}_{\text{norm}} = \hat{\mathbf{D}}^{-1/2}
\hat{\mathbf{A}} \hat{\mathbf{D}}^{-1/2}` GCN's normalised adjacency
(:math:`\hat{\mathbf{A}} = \mathbf{A} + \mathbf{I}`, a node that already has a
self-loop keeps its weight; :math:`A_{ij}` is the weight of edge
:math:`j \to i`, 1 by default). The layer has no weights: it propagates the
predictions :math:`\mathbf{H}` of some other network (a personalized PageRank
with teleport probability :math:`\alpha`, truncated after ``K`` steps).

Shapes: ``x`` ``(|V|, F)`` (or ``(|V|, ...)``), ``edge_index`` ``(2, |E|)`` (or
an :class:`~gnncore.sparse.Adjacency` for the fused CSR kernel),
``edge_weight`` ``(|E|,)`` optional → same shape as ``x``.
"""

from __future__ import annotations

from typing import ClassVar

import jax.numpy as jnp
from flax import nnx

from gnncore.conv.sg import PropagationCache, WeightedSum, gcn_weights, is_traced
from gnncore.sparse import Adjacency, as_dense

__all__ = ["APPNP"]


class APPNP(WeightedSum):
    """Personalized-PageRank propagation (PyG's ``APPNP``).

    Arguments:
        K: number of propagation steps (``0`` returns ``x``).
        alpha: teleport (restart) probability :math:`\\alpha`.
        dropout: while training, each step drops every normalised edge weight
            (self-loops included) with this probability and scales the rest by
            ``1 / (1 - dropout)``; the masks come from the ``dropout`` stream of
            ``rngs`` and are drawn afresh for each step (PyG re-applies dropout
            to the already-dropped weights each step: same expectation, the
            paper's and this layer's masks are independent per step).
        cached: reuse the normalised edge weights (the graph never changes).
            The cache is filled either explicitly by :meth:`precompute_norm` or
            by the first *eager* call (as in PyG); a traced call (``jax.jit``,
            ``nnx.jit``, ``grad``, ``vmap``) with an empty cache raises
            ``ValueError``, because a traced value must not outlive its trace.
            Once filled, an edge list's own cached copy is used (the given
            ``edge_index`` / ``edge_weight`` are then ignored, as in PyG); an
            :class:`Adjacency` must be passed again (its structure is not
            cached). A different node count, or a different kind of edge input,
            raises ``ValueError``.
        add_self_loops: add a self-loop per node before normalising.
        rngs: ``nnx.Rngs`` with a ``dropout`` stream; needed only with
            ``dropout > 0``.

    Call ``layer(x, edge_index, edge_weight=None)``.
    """

    takes_edge_weight: ClassVar[bool] = True

    def __init__(self, K: int, alpha: float, *, dropout: float = 0.0,
                 cached: bool = False, add_self_loops: bool = True,
                 rngs: nnx.Rngs | None = None):
        super().__init__()
        if K < 0:
            raise ValueError(f"APPNP needs K >= 0; got K={K}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"APPNP needs 0 <= dropout < 1; got {dropout}")
        if dropout > 0 and rngs is None:
            raise ValueError("APPNP(dropout > 0) needs rngs=nnx.Rngs(dropout=...)")
        self.K, self.alpha = int(K), float(alpha)
        self.cached, self.add_self_loops = cached, add_self_loops
        self.dropout = nnx.Dropout(dropout, rngs=rngs) if dropout > 0 else None
        self._cache_index = PropagationCache(None)  # None for an Adjacency
        self._cache_weight = PropagationCache(None)
        self._cache_loop = PropagationCache(None)
        self._cache_num_nodes = -1

    def _normalise(self, edge_index, edge_weight, num_nodes):
        weight, loop = gcn_weights(edge_index, num_nodes, edge_weight,
                                   add_self_loops=self.add_self_loops)
        index = None if isinstance(edge_index, Adjacency) else edge_index
        return index, weight, loop

    def precompute_norm(self, edge_index, num_nodes: int, edge_weight=None) -> None:
        """Fill the cache (eagerly, outside any jit) for ``cached=True``.

        ``edge_index`` may be an edge list or an :class:`Adjacency`; later calls
        must pass the same kind.
        """
        self._fill(edge_index, edge_weight, int(num_nodes),
                   "APPNP.precompute_norm must run eagerly, outside jit/grad/vmap: "
                   "call it once before the compiled step")

    def _fill(self, edge_index, edge_weight, num_nodes, error):
        index, weight, loop = self._normalise(edge_index, edge_weight, num_nodes)
        if is_traced(weight):
            raise ValueError(error)
        self._cache_index.set_value(index)
        self._cache_weight.set_value(weight)
        self._cache_loop.set_value(loop)
        self._cache_num_nodes = num_nodes

    def clear_cache(self) -> None:
        """Empty the cache (e.g. before switching to another graph)."""
        for var in (self._cache_index, self._cache_weight, self._cache_loop):
            var.set_value(None)
        self._cache_num_nodes = -1

    def _cached_norm(self, edge_index, edge_weight, num_nodes):
        if self._cache_weight.get_value() is None:
            self._fill(edge_index, edge_weight, num_nodes,
                       "APPNP(cached=True) has an empty cache inside a traced call "
                       "(jit/grad/vmap), where it cannot be filled: call "
                       "layer.precompute_norm(edge_index, num_nodes) (or the layer once) "
                       "eagerly before the compiled step")
        if self._cache_num_nodes != num_nodes:
            raise ValueError(
                f"APPNP cache was computed for {self._cache_num_nodes} nodes but x has "
                f"{num_nodes}: call precompute_norm again (or clear_cache) for the new graph")
        index = self._cache_index.get_value()
        if (index is None) != isinstance(edge_index, Adjacency):
            raise ValueError("APPNP cache was filled for a different kind of edge input "
                             "(edge_index vs Adjacency): pass the same kind")
        return index, self._cache_weight.get_value(), self._cache_loop.get_value()

    def _drop(self, weight, loop):
        if loop is None:
            return self.dropout(weight), None
        both = self.dropout(jnp.concatenate([weight, loop]))
        return both[:weight.shape[0]], both[weight.shape[0]:]

    def __call__(self, x, edge_index, edge_weight=None):
        h = as_dense(x)
        num_nodes = h.shape[0]
        if self.cached:
            index, weight, loop = self._cached_norm(edge_index, edge_weight, num_nodes)
        else:
            index, weight, loop = self._normalise(edge_index, edge_weight, num_nodes)
        edges = edge_index if index is None else index
        out = h
        for _ in range(self.K):
            w, d = (weight, loop) if self.dropout is None else self._drop(weight, loop)
            out = (1.0 - self.alpha) * self.weighted_sum(edges, out, w, d) + self.alpha * h
        return out

r"""ChebConv: Chebyshev spectral graph convolution (Defferrard et al., 2016).

.. math::
    \mathbf{X}' = \sum_{k=0}^{K-1} \mathbf{Z}^{(k)} \mathbf{\Theta}^{(k)} + \mathbf{b},
    \qquad
    \mathbf{Z}^{(0)} = \mathbf{X}, \quad
    \mathbf{Z}^{(1)} = \hat{\mathbf{L}} \mathbf{X}, \quad
    \mathbf{Z}^{(k)} = 2 \hat{\mathbf{L}} \mathbf{Z}^{(k-1)} - \mathbf{Z}^{(k-2)}

with the scaled Laplacian :math:`\hat{\mathbf{L}} = 2\mathbf{L} / \lambda_{\max}
- \mathbf{I}` (so :math:`\mathbf{Z}^{(k)} = T_k(\hat{\mathbf{L}})\mathbf{X}`,
:math:`T_k` the Chebyshev polynomials) and, as in PyG's ``get_laplacian``,

- ``normalization=None``: :math:`\mathbf{L} = \mathbf{D} - \mathbf{A}`;
- ``"sym"``: :math:`\mathbf{L} = \mathbf{I} - \mathbf{D}^{-1/2} \mathbf{A}
  \mathbf{D}^{-1/2}`;
- ``"rw"``: :math:`\mathbf{L} = \mathbf{I} - \mathbf{A} \mathbf{D}^{-1}`.

:math:`A_{ij}` is the summed weight of the edges :math:`j \to i` (1 by
default) with self-loops removed first, and :math:`D_{jj} = \sum_i A_{ij}` the
(weighted) *out*-degree of node :math:`j`, i.e. the degree is taken at the edge
source as PyG does; for an undirected graph (both directions present) that is
the ordinary degree, :math:`\mathbf{A} \mathbf{D}^{-1}` has the eigenvalues of
:math:`\mathbf{D}^{-1} \mathbf{A}`. A node of degree 0 gets
:math:`D^{-1/2} = D^{-1} = 0`, and every node (isolated ones too) keeps its
diagonal entry 1 of the normalised Laplacians.

Shapes: ``x`` ``(|V|, F_in)`` (or :class:`~gnncore.sparse.SparseFeatures`),
``edge_index`` ``(2, |E|)`` (or an :class:`~gnncore.sparse.Adjacency` for the
fused CSR kernel), ``edge_weight`` ``(|E|,)`` optional, ``lambda_max`` a scalar
→ ``(|V|, F_out)``.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, ClassVar

import jax.numpy as jnp
from flax import nnx

from gnncore.conv.sg import WeightedSum
from gnncore.inits import linear, zeros
from gnncore.sparse import as_dense
from gnncore.utils import as_edge_index, is_self_loop

__all__ = ["ChebConv"]

NORMALIZATIONS = (None, "sym", "rw")


class ChebConv(WeightedSum):
    """Chebyshev spectral graph convolution (PyG's ``ChebConv``).

    Arguments:
        in_features: input feature size ``F_in``.
        out_features: output feature size ``F_out``.
        K: Chebyshev filter size: the terms :math:`T_0 \\dots T_{K-1}` (``K - 1``
            hops); at least 1.
        normalization: Laplacian: ``None`` (:math:`D - A`), ``"sym"`` (default)
            or ``"rw"`` (see the module doc).
        bias: learn an additive bias.
        rngs: ``nnx.Rngs`` for the weights (glorot; zero bias, as in PyG).

    Parameters: ``lins[k].kernel`` (``F_in × F_out``, PyG's ``lins.k.weight``
    transposed) for each term and ``bias``.

    Call ``layer(x, edge_index, edge_weight=None, lambda_max=None)``.
    ``lambda_max`` is the largest eigenvalue of :math:`\\mathbf{L}` (a Python
    number or a scalar array; it may be traced). It defaults to 2.0 for
    ``"sym"`` and ``"rw"`` (their spectrum lies in [0, 2]). With
    ``normalization=None`` it must be given: finding it would need an
    eigendecomposition (a host computation, not traceable), so compute it once
    outside the compiled step, e.g. ``numpy.linalg.eigvalsh`` of
    :math:`\\mathbf{D} - \\mathbf{A}` for an undirected graph, or pass an upper
    bound such as twice the largest degree. (PyG 2.8 does not raise there: it
    falls back to twice the largest entry of :math:`\\mathbf{L}`, i.e. twice
    the largest out-degree; pass that value to reproduce it.)
    """

    takes_edge_weight: ClassVar[bool] = True
    #: the explorer's "cheb" kind: two Chebyshev terms (one hop) unless a spec sets K
    spec_defaults: ClassVar[Mapping[str, Any]] = MappingProxyType({"K": 2})

    def __init__(self, in_features: int, out_features: int, K: int, *,
                 normalization: str | None = "sym", bias: bool = True, rngs: nnx.Rngs):
        super().__init__()
        if K < 1:
            raise ValueError(f"ChebConv needs K >= 1; got K={K}")
        if normalization not in NORMALIZATIONS:
            raise ValueError(f"unknown normalization {normalization!r}; choose one of "
                             f"{list(NORMALIZATIONS)}")
        self.in_features, self.out_features = in_features, out_features
        self.K, self.normalization = int(K), normalization
        self.lins = nnx.List([linear(in_features, out_features, bias=False, init="glorot",
                                     rngs=rngs) for _ in range(K)])
        self.bias = nnx.Param(zeros(rngs.params(), (out_features,))) if bias else None

    def scaled_laplacian(self, edge_index, num_nodes: int, edge_weight=None,
                         lambda_max=None, dtype=jnp.float32):
        r"""``(weight, diag)`` of :math:`\hat L = 2L/\lambda_{\max} - I`:
        ``weight`` ([E]) the entry of each given edge (0 for a self-loop) and
        ``diag`` ([N]) the diagonal."""
        lam = self._lambda_max(lambda_max, dtype)
        index = as_edge_index(edge_index)
        src, dst = index[0], index[1]
        w = (jnp.ones(index.shape[1], dtype) if edge_weight is None
             else edge_weight.astype(dtype))
        # PyG removes self-loops; a zero weight does the same at a static shape.
        w = jnp.where(is_self_loop(index), jnp.zeros_like(w), w)
        deg = jnp.zeros((num_nodes,), dtype).at[src].add(w)  # out-degree, as PyG
        if self.normalization is None:
            off, diag = w, deg
        elif self.normalization == "sym":
            safe = jnp.where(deg > 0, deg, 1.0)
            dis = jnp.where(deg > 0, 1.0 / jnp.sqrt(safe), 0.0)
            off, diag = dis[src] * w * dis[dst], jnp.ones_like(deg)
        else:
            safe = jnp.where(deg != 0, deg, 1.0)
            off, diag = jnp.where(deg != 0, 1.0 / safe, 0.0)[src] * w, jnp.ones_like(deg)
        scale = 2.0 / lam
        # L = diag(diag) - Off, so L_hat = (scale * diag - 1) I - scale * Off.
        return -scale * off, scale * diag - 1.0

    def _lambda_max(self, lambda_max, dtype):
        if lambda_max is None:
            if self.normalization is None:
                raise ValueError(
                    "ChebConv(normalization=None) needs lambda_max, the largest "
                    "eigenvalue of L = D - A: pass layer(x, edge_index, lambda_max=...). "
                    "It cannot be computed inside a trace (that needs an "
                    "eigendecomposition on the host); compute it once eagerly, e.g. "
                    "numpy.linalg.eigvalsh(L).max(), or pass an upper bound such as "
                    "2 * max degree")
            return jnp.asarray(2.0, dtype)
        if isinstance(lambda_max, numbers.Real) and not lambda_max > 0:
            raise ValueError(f"ChebConv needs lambda_max > 0; got {lambda_max}")
        lam = jnp.asarray(lambda_max, dtype)
        if lam.size != 1:
            raise ValueError("ChebConv takes one lambda_max for the whole graph (a scalar); "
                             f"got shape {lam.shape}")
        return lam.reshape(())

    def __call__(self, x, edge_index, edge_weight=None, lambda_max=None):
        x = as_dense(x)
        dtype = jnp.promote_types(x.dtype, jnp.float32)
        weight, diag = self.scaled_laplacian(edge_index, x.shape[0], edge_weight,
                                             lambda_max, dtype)
        t_prev, t_cur = None, x
        out = self.lins[0](x)
        for k in range(1, self.K):
            t_next = self.weighted_sum(edge_index, t_cur, weight, diag)
            if k > 1:
                t_next = 2.0 * t_next - t_prev
            out = out + self.lins[k](t_next)
            t_prev, t_cur = t_cur, t_next
        if self.bias is not None:
            out = out + self.bias[...]
        return out

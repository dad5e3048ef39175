r"""Normalisation layers over the nodes of a graph.

.. math::
    \mathbf{x}'_i = \frac{\mathbf{x}_i - \mu}{\sqrt{\sigma^2 + \epsilon}}
    \odot \boldsymbol{\gamma} + \boldsymbol{\beta}

:class:`BatchNorm`: :math:`\mu, \sigma^2` are the mean and (biased) variance
over all nodes while training, and the running statistics in evaluation.
:class:`LayerNorm`: per node over its features (``mode="node"``), or per graph
over all its nodes and features (``mode="graph"``). :class:`GraphNorm`: per
graph and feature, with a learnable share of the mean subtracted.

The per-graph layers take a ``batch`` vector ([N] graph ids) and the static
number of graphs ``num_graphs``; a ``mask`` ([N] bool) keeps padding nodes out
of every statistic.
"""

from __future__ import annotations

import jax.numpy as jnp
from flax import nnx

from gnncore.segment import segment_sum
from gnncore.sparse import as_dense
from gnncore.utils import _static_num_graphs

__all__ = ["BatchNorm", "GraphNorm", "LayerNorm"]


class BatchNorm(nnx.Module):
    """Batch normalisation over nodes (PyG's ``BatchNorm``, torch conventions).

    Arguments:
        in_features: feature size ``F``.
        eps: added to the variance.
        momentum: weight of the new batch in the running statistics (torch's
            convention: ``running = (1 - momentum) * running + momentum * batch``;
            the running variance uses the unbiased batch variance).
        affine: learn a scale and shift.
        use_running_average: normalise with the running statistics (evaluation).
            ``model.train()`` / ``model.eval()`` toggle it.
        rngs: accepted for a uniform constructor; unused.

    Running statistics are ``nnx.BatchStat`` variables: updated in place in train
    mode, so under plain ``jax.jit`` their update is silently lost (the pitfall
    the explorer demonstrates). ``mask`` ([N] bool) restricts the statistics to
    real nodes when the graph is padded.
    """

    def __init__(self, in_features: int, *, eps: float = 1e-5, momentum: float = 0.1,
                 affine: bool = True, use_running_average: bool = False,
                 rngs: nnx.Rngs | None = None):
        self.in_features, self.eps, self.momentum = in_features, eps, momentum
        self.use_running_average = use_running_average
        self.mean = nnx.BatchStat(jnp.zeros((in_features,), jnp.float32))
        self.var = nnx.BatchStat(jnp.ones((in_features,), jnp.float32))
        if affine:
            self.scale = nnx.Param(jnp.ones((in_features,), jnp.float32))
            self.bias = nnx.Param(jnp.zeros((in_features,), jnp.float32))
        else:
            self.scale = self.bias = None

    def __call__(self, x, *, mask=None, use_running_average: bool | None = None):
        if use_running_average is None:
            use_running_average = self.use_running_average
        if use_running_average:
            mean, var = self.mean[...], self.var[...]
        else:
            if mask is None:
                n = x.shape[0]
                if n < 2:
                    raise ValueError("BatchNorm in train mode needs more than one node "
                                     "(the batch variance of one node is undefined); "
                                     "call model.eval() or add nodes")
                mean = jnp.mean(x, axis=0)
                var = jnp.mean(jnp.square(x - mean), axis=0)
            else:
                w = mask.astype(x.dtype)[:, None]
                n = jnp.maximum(jnp.sum(w), 1.0)
                mean = jnp.sum(x * w, axis=0) / n
                var = jnp.sum(jnp.square(x - mean) * w, axis=0) / n
            unbiased = var * n / jnp.maximum(n - 1, 1)
            m = self.momentum
            self.mean[...] = (1 - m) * self.mean[...] + m * mean
            self.var[...] = (1 - m) * self.var[...] + m * unbiased
        out = (x - mean) / jnp.sqrt(var + self.eps)
        if self.scale is not None:
            out = out * self.scale[...] + self.bias[...]
        return out


# ------------------------------------------------------------ per-graph norms
def _graph_ids(x, batch, num_graphs, mask):
    """``(B, gather_ids, stat_ids)``: the static graph count, each node's graph
    (for reading statistics back) and the ids the statistics are summed over
    (padding nodes moved out of range, so segment sums drop them)."""
    n = x.shape[0]
    num = _static_num_graphs(batch, num_graphs, mask=mask, arg="num_graphs")
    num = max(num, 1)
    ids = jnp.zeros((n,), jnp.int32) if batch is None else batch
    stat_ids = ids if mask is None else jnp.where(mask, ids, num)
    return num, ids, stat_ids


def _per_node(stats, ids):
    # Nodes whose id is out of range (padding) read the nearest graph's statistics
    # instead of garbage; their outputs are not meant to be used.
    return jnp.take(stats, ids, axis=0, mode="clip")


def _accum_dtype(x):
    return jnp.promote_types(x.dtype, jnp.float32)


class LayerNorm(nnx.Module):
    r"""Layer normalisation of node features (PyG's ``LayerNorm``).

    ``mode="graph"`` (PyG's default): each graph is one example; the mean and
    (biased) variance are taken over all its nodes *and* features,

    .. math::
        \mathbf{x}'_i = \frac{\mathbf{x}_i - \mu_{g(i)}}
        {\sqrt{\sigma^2_{g(i)} + \epsilon}} \odot \boldsymbol{\gamma}
        + \boldsymbol{\beta},
        \qquad \mu_g = \frac{1}{N_g F} \sum_{i \in g} \sum_f x_{if}.

    ``mode="node"``: each node is one example (``torch.nn.functional.layer_norm``
    over the feature axis); ``batch``, ``num_graphs`` and ``mask`` are ignored.

    Arguments:
        features: feature size ``F`` (``x`` is ``[N, F]``).
        eps: added to the variance.
        affine: learn ``scale`` (:math:`\gamma`, ones) and ``bias``
            (:math:`\beta`, zeros), both ``[F]``.
        mode: ``"graph"`` or ``"node"``.
        rngs: accepted for a uniform constructor; unused.

    Call ``layer(x, batch=None, num_graphs=None, *, mask=None)``. ``batch=None``
    means one graph. With a ``batch`` vector the number of graphs must be static:
    it is read from ``batch`` when running eagerly, but under ``jax.jit`` pass
    ``num_graphs`` (a ``ValueError`` says so otherwise). ``mask`` ([N] bool)
    keeps padding nodes out of the statistics; nodes with a graph id outside
    ``[0, num_graphs)`` are left out too. Padding nodes are still normalised
    (with a neighbouring graph's statistics) so that outputs stay finite; ignore
    them. An empty graph's statistics are 0.

    Divergence from PyG: PyG's graph mode without ``batch`` divides by
    ``std + eps`` while its batched path divides by ``sqrt(var + eps)``; here
    both use ``sqrt(var + eps)``, so ``batch=None`` and ``batch=zeros`` agree.
    """

    def __init__(self, features: int, *, eps: float = 1e-5, affine: bool = True,
                 mode: str = "graph", rngs: nnx.Rngs | None = None):
        if mode not in ("graph", "node"):
            raise ValueError(f"LayerNorm mode must be 'graph' or 'node'; got {mode!r}")
        self.features, self.eps, self.mode, self.affine = features, eps, mode, affine
        if affine:
            self.scale = nnx.Param(jnp.ones((features,), jnp.float32))
            self.bias = nnx.Param(jnp.zeros((features,), jnp.float32))
        else:
            self.scale = self.bias = None

    def __call__(self, x, batch=None, num_graphs: int | None = None, *, mask=None):
        x = as_dense(x)
        if x.ndim != 2 or x.shape[1] != self.features:
            raise ValueError(f"LayerNorm({self.features}) expects x of shape [N, "
                             f"{self.features}]; got {tuple(x.shape)}")
        h = x.astype(_accum_dtype(x))
        if self.mode == "node":
            mean = jnp.mean(h, axis=-1, keepdims=True)
            var = jnp.mean(jnp.square(h - mean), axis=-1, keepdims=True)
            out = (h - mean) / jnp.sqrt(var + self.eps)
        else:
            num, ids, stat_ids = _graph_ids(h, batch, num_graphs, mask)
            count = segment_sum(jnp.ones((h.shape[0],), h.dtype), stat_ids, num)
            denom = jnp.maximum(count, 1.0) * h.shape[1]
            mean = segment_sum(jnp.sum(h, axis=-1), stat_ids, num) / denom
            centred = h - _per_node(mean, ids)[:, None]
            var = segment_sum(jnp.sum(jnp.square(centred), axis=-1), stat_ids, num) / denom
            out = centred / jnp.sqrt(_per_node(var, ids) + self.eps)[:, None]
        if self.scale is not None:
            out = out * self.scale[...] + self.bias[...]
        return out.astype(x.dtype)


class GraphNorm(nnx.Module):
    r"""Graph normalisation (Cai et al., 2021; PyG's ``GraphNorm``).

    .. math::
        \mathbf{x}'_i = \boldsymbol{\gamma} \odot
        \frac{\mathbf{x}_i - \boldsymbol{\alpha} \odot \boldsymbol{\mu}_{g(i)}}
        {\sqrt{\operatorname{mean}_{j \in g(i)}\big[(\mathbf{x}_j -
        \boldsymbol{\alpha} \odot \boldsymbol{\mu}_{g(i)})^2\big] + \epsilon}}
        + \boldsymbol{\beta}

    with :math:`\boldsymbol{\mu}_g` the per-feature mean over the nodes of graph
    ``g``. Parameters (all ``[F]``): ``weight`` :math:`\gamma` (ones), ``bias``
    :math:`\beta` (zeros) and ``mean_scale`` :math:`\alpha` (ones).

    Call ``layer(x, batch=None, num_graphs=None, *, mask=None)`` with the same
    rules as :class:`LayerNorm`'s graph mode: ``batch=None`` is one graph,
    ``num_graphs`` is required under ``jax.jit`` when ``batch`` is given, and
    ``mask`` keeps padding nodes out of the statistics.
    """

    def __init__(self, features: int, *, eps: float = 1e-5,
                 rngs: nnx.Rngs | None = None):
        self.features, self.eps = features, eps
        self.weight = nnx.Param(jnp.ones((features,), jnp.float32))
        self.bias = nnx.Param(jnp.zeros((features,), jnp.float32))
        self.mean_scale = nnx.Param(jnp.ones((features,), jnp.float32))

    def __call__(self, x, batch=None, num_graphs: int | None = None, *, mask=None):
        x = as_dense(x)
        if x.ndim != 2 or x.shape[1] != self.features:
            raise ValueError(f"GraphNorm({self.features}) expects x of shape [N, "
                             f"{self.features}]; got {tuple(x.shape)}")
        h = x.astype(_accum_dtype(x))
        num, ids, stat_ids = _graph_ids(h, batch, num_graphs, mask)
        count = segment_sum(jnp.ones((h.shape[0],), h.dtype), stat_ids, num)
        count = jnp.maximum(count, 1.0)[:, None]
        mean = segment_sum(h, stat_ids, num) / count
        out = h - _per_node(mean, ids) * self.mean_scale[...]
        var = segment_sum(jnp.square(out), stat_ids, num) / count
        out = self.weight[...] * out / jnp.sqrt(_per_node(var, ids) + self.eps) + self.bias[...]
        return out.astype(x.dtype)

r"""BatchNorm over the nodes of a graph.

.. math::
    \mathbf{x}'_i = \frac{\mathbf{x}_i - \mu}{\sqrt{\sigma^2 + \epsilon}}
    \odot \boldsymbol{\gamma} + \boldsymbol{\beta}

with :math:`\mu, \sigma^2` the mean and (biased) variance over nodes while
training, and the running statistics in evaluation.
"""

from __future__ import annotations

import jax.numpy as jnp
from flax import nnx

__all__ = ["BatchNorm"]


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

"""Weight initialisers matching PyTorch Geometric's defaults."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

__all__ = ["glorot", "linear", "torch_bias", "torch_kernel", "zeros"]

glorot = nnx.initializers.glorot_uniform()
zeros = nnx.initializers.zeros_init()
# torch.nn.Linear's kaiming_uniform(a=sqrt(5)): U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
torch_kernel = nnx.initializers.variance_scaling(1.0 / 3.0, "fan_in", "uniform")


def torch_bias(fan_in: int):
    """torch.nn.Linear's bias init: U(-1/sqrt(fan_in), 1/sqrt(fan_in))."""
    bound = 1.0 / max(fan_in, 1) ** 0.5

    def init(key, shape, dtype=jnp.float32):
        return jax.random.uniform(key, shape, dtype, -bound, bound)

    return init


def linear(in_features: int, out_features: int, *, bias: bool = True,
           init: str = "torch", rngs: nnx.Rngs) -> nnx.Linear:
    """An ``nnx.Linear`` initialised like PyG: ``init="glorot"`` (zero bias) or
    ``"torch"`` (torch.nn.Linear's default)."""
    if init == "glorot":
        return nnx.Linear(in_features, out_features, use_bias=bias,
                          kernel_init=glorot, bias_init=zeros, rngs=rngs)
    return nnx.Linear(in_features, out_features, use_bias=bias, kernel_init=torch_kernel,
                      bias_init=torch_bias(in_features), rngs=rngs)

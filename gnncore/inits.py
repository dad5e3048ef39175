"""Weight initialisers matching PyTorch Geometric's defaults."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from gnncore.utils import to_device

__all__ = ["glorot", "linear", "torch_bias", "torch_kernel", "zeros"]

# An initialiser runs once per new weight shape, eagerly: as plain JAX calls it
# compiled two or three programs for each (``uniform``, the scale, ...) with all of
# XLA's optimisations, 0.25-0.5 s on CPU for a program that runs once (a drawn
# node changes the first weight's shape when the features are one-hot ids). Here
# each is one jitted program, and on CPU it is compiled without the
# optimisations: the same values, bit for bit (tests/gnncore/test_layers.py).
_RUN_ONCE_OPTIONS = {"xla_backend_optimization_level": 0,
                     "xla_llvm_disable_expensive_passes": True,
                     "xla_cpu_use_fusion_emitters": False}


def _compiled_once(init):
    """``init(key, shape, dtype)`` as one program per shape and dtype, compiled
    cheaply on CPU (see above); any other call (a sharded output) as it was."""
    jitted = {}

    @functools.wraps(init)
    def call(key, shape, dtype=jnp.float32, out_sharding=None):
        if out_sharding is not None or isinstance(key, jax.core.Tracer):
            return init(key, shape, dtype, out_sharding=out_sharding)
        cpu = jax.default_backend() == "cpu"
        if cpu not in jitted:
            jitted[cpu] = jax.jit(init, static_argnums=(1, 2),
                                  compiler_options=_RUN_ONCE_OPTIONS if cpu else None)
        try:
            return jitted[cpu](key, tuple(int(d) for d in shape), jnp.dtype(dtype))
        except ValueError as err:
            # Inside an outer trace with a concrete key (a model built under jit):
            # a nested jit takes no compiler options; the outer program has them.
            if "compiler_options" not in str(err):
                raise
            return init(key, shape, dtype)

    return call


def zeros(key, shape, dtype=jnp.float32, out_sharding=None):
    """Zeros: copied from the host (nothing to compile) unless traced."""
    if out_sharding is not None or isinstance(key, jax.core.Tracer):
        return jnp.zeros(shape, dtype, out_sharding=out_sharding)
    return to_device(np.zeros(shape, jnp.dtype(dtype)))


glorot = _compiled_once(nnx.initializers.glorot_uniform())
# torch.nn.Linear's kaiming_uniform(a=sqrt(5)): U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
torch_kernel = _compiled_once(nnx.initializers.variance_scaling(1.0 / 3.0, "fan_in", "uniform"))


@functools.cache
def torch_bias(fan_in: int):
    """torch.nn.Linear's bias init: U(-1/sqrt(fan_in), 1/sqrt(fan_in))."""
    bound = 1.0 / max(fan_in, 1) ** 0.5

    def init(key, shape, dtype=jnp.float32, out_sharding=None):
        return jax.random.uniform(key, shape, dtype, -bound, bound, out_sharding=out_sharding)

    return _compiled_once(init)


def linear(in_features: int, out_features: int, *, bias: bool = True,
           init: str = "torch", rngs: nnx.Rngs) -> nnx.Linear:
    """An ``nnx.Linear`` initialised like PyG: ``init="glorot"`` (zero bias) or
    ``"torch"`` (torch.nn.Linear's default)."""
    if init == "glorot":
        return nnx.Linear(in_features, out_features, use_bias=bias,
                          kernel_init=glorot, bias_init=zeros, rngs=rngs)
    return nnx.Linear(in_features, out_features, use_bias=bias, kernel_init=torch_kernel,
                      bias_init=torch_bias(in_features), rngs=rngs)

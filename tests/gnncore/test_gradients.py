"""Every parameter of every layer and model gets a finite, non-zero gradient."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from zoo import LAYERS, MODELS, build, sample_inputs

ALL = {**{f"layer:{k}": v for k, v in LAYERS.items()},
       **{f"model:{k}": v for k, v in MODELS.items()}}


@pytest.mark.parametrize("name", sorted(ALL))
def test_every_parameter_gets_a_finite_nonzero_gradient(name):
    module, call = build(ALL[name])
    module.eval()  # deterministic: no dropout zeroing a whole weight by chance
    args = sample_inputs()
    probe = None

    def loss_fn(m):
        out = call(m, *args)
        nonlocal probe
        if probe is None:
            probe = jnp.asarray(np.random.default_rng(1).normal(size=out.shape), out.dtype)
        return jnp.sum(out * probe)

    grads = nnx.jit(nnx.grad(loss_fn))(module)
    flat = nnx.to_flat_state(grads)
    assert flat, "no parameters found"
    for path, var in flat:
        g = np.asarray(var.get_value())
        assert np.all(np.isfinite(g)), path
        assert np.any(g != 0), f"zero gradient for {'/'.join(map(str, path))}"
    n_params = len(jax.tree.leaves(nnx.state(module, nnx.Param)))
    assert len(flat) == n_params

"""jit == eager for every layer and model; eval forwards are pure under jax.jit;
equal shapes never retrace."""

import jax
import numpy as np
import pytest
from flax import nnx
from zoo import LAYERS, MODELS, build, sample_inputs

ALL = {**{f"layer:{k}": v for k, v in LAYERS.items()},
       **{f"model:{k}": v for k, v in MODELS.items()}}


@pytest.mark.parametrize("name", sorted(ALL))
def test_eval_forward_same_eager_nnx_jit_and_jax_jit(name):
    module, call = build(ALL[name])
    module.eval()
    args = sample_inputs()
    eager = call(module, *args)
    via_nnx = nnx.jit(call)(module, *args)
    # A pure eval-mode forward is safe under plain jax.jit: nothing is mutated.
    via_jax = jax.jit(call)(module, *args)
    np.testing.assert_allclose(np.asarray(via_nnx), np.asarray(eager), atol=1e-5)
    np.testing.assert_allclose(np.asarray(via_jax), np.asarray(eager), atol=1e-5)


@pytest.mark.parametrize("name", sorted(ALL))
def test_train_forward_same_eager_and_nnx_jit(name):
    # Two identical modules (same seeds): dropout masks and BatchNorm updates
    # come out the same whether the forward is compiled or not.
    eager_mod, call = build(ALL[name])
    jit_mod, _ = build(ALL[name])
    eager_mod.train()
    jit_mod.train()
    args = sample_inputs()
    step = nnx.jit(call)
    for _ in range(2):
        np.testing.assert_allclose(np.asarray(step(jit_mod, *args)),
                                   np.asarray(call(eager_mod, *args)), atol=1e-5)
    for (path, a), (_, b) in zip(nnx.to_flat_state(nnx.state(eager_mod)),
                                 nnx.to_flat_state(nnx.state(jit_mod))):
        np.testing.assert_allclose(_host(a.get_value()), _host(b.get_value()),
                                   atol=1e-5, err_msg=str(path))


def _host(value):
    if value is None:  # e.g. an unfilled GCN cache
        return np.zeros(0)
    if jax.dtypes.issubdtype(value.dtype, jax.dtypes.prng_key):
        value = jax.random.key_data(value)
    return np.asarray(value)


@pytest.mark.parametrize("name", sorted(ALL))
def test_one_trace_for_repeated_calls_with_equal_shapes(name):
    module, call = build(ALL[name])
    module.eval()
    traces = []

    def counted(m, *a):
        traces.append(1)
        return call(m, *a)

    step = nnx.jit(counted)
    for seed in range(3):  # new values, same shapes
        step(module, *sample_inputs(seed))
    assert len(traces) == 1


def test_new_shapes_retrace():
    module, call = build(LAYERS["gcn"])
    traces = []

    @nnx.jit
    def step(m, x, ei):
        traces.append(x.shape)
        return m(x, ei)

    x, ei, _, _ = sample_inputs()
    step(module, x, ei)
    step(module, x, ei[:, :-1])
    assert len(traces) == 2

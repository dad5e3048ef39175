"""Aggregation modules, segment var/std and MessagePassing with the new aggregations."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from gnncore.aggr import (
    Aggregation,
    MaxAggregation,
    MeanAggregation,
    MinAggregation,
    MultiAggregation,
    SoftmaxAggregation,
    StdAggregation,
    SumAggregation,
    VarAggregation,
    resolve,
)
from gnncore.message_passing import MessagePassing
from gnncore.segment import segment_reduce, segment_std, segment_var
from gnncore.sparse import Adjacency

# 6 segments: 0 has 3 rows, 1 is empty, 2 has one row, 3 has 2 equal rows
# (zero variance), 4 has 3 rows, 5 (last) is empty.
IDS = np.array([0, 2, 0, 3, 4, 0, 3, 4, 4], dtype=np.int32)
N_SEG = 6
RNG = np.random.default_rng(0)
X = RNG.normal(size=(len(IDS), 3)).astype(np.float32)
X[6] = X[3]  # segment 3: two identical rows


def np_softmax_aggr(rows, t):
    z = rows * t
    w = np.exp(z - z.max(0))
    return (rows * w / w.sum(0)).sum(0)


def np_reduce(data, ids, n, how, t=1.0):
    out = np.zeros((n,) + data.shape[1:])
    for s in range(n):
        rows = data[ids == s].astype(np.float64)
        if len(rows) == 0:
            continue
        out[s] = {
            "sum": lambda r: r.sum(0), "add": lambda r: r.sum(0),
            "mean": lambda r: r.mean(0), "max": lambda r: r.max(0),
            "min": lambda r: r.min(0), "var": lambda r: r.var(0),
            "std": lambda r: np.sqrt(r.var(0) + 1e-5),
            "softmax": lambda r: np_softmax_aggr(r, t),
        }[how](rows)
    return out


CLASSES = {"sum": SumAggregation, "mean": MeanAggregation, "max": MaxAggregation,
           "min": MinAggregation, "var": VarAggregation, "std": StdAggregation,
           "softmax": SoftmaxAggregation}


@pytest.mark.parametrize("how", sorted(CLASSES))
def test_each_aggregation_matches_numpy(how):
    module = CLASSES[how]()
    out = np.asarray(module(jnp.asarray(X), jnp.asarray(IDS), N_SEG))
    assert out.shape == (N_SEG, 3)
    np.testing.assert_allclose(out, np_reduce(X, IDS, N_SEG, how), rtol=1e-5, atol=1e-6)
    assert np.all(out[[1, 5]] == 0.0)  # empty segments, including a trailing one
    # num_segments inferred eagerly from index.max() + 1 (drops the trailing empty one).
    inferred = np.asarray(module(jnp.asarray(X), jnp.asarray(IDS)))
    np.testing.assert_allclose(inferred, out[:5], rtol=1e-6, atol=1e-7)
    # resolve() by name builds the same thing.
    np.testing.assert_allclose(np.asarray(resolve(how)(X, IDS, N_SEG)), out, rtol=1e-6)


def test_single_element_and_zero_variance_segments():
    var = np.asarray(segment_var(jnp.asarray(X), jnp.asarray(IDS), N_SEG))
    std = np.asarray(segment_std(jnp.asarray(X), jnp.asarray(IDS), N_SEG))
    assert np.all(var >= 0)
    assert np.all(var[[1, 2, 3, 5]] == 0.0)
    np.testing.assert_allclose(std[[2, 3]], np.sqrt(1e-5), rtol=1e-5)  # PyG's eps floor
    assert np.all(std[[1, 5]] == 0.0)
    # Registered for segment_reduce too.
    np.testing.assert_array_equal(np.asarray(segment_reduce(X, IDS, N_SEG, "std")), std)
    # Two-pass variance keeps precision with a large mean (E[x^2]-E[x]^2 would not).
    big = jnp.array([1e4 + 0.1, 1e4 - 0.1, 1e4 + 0.3, 1e4 - 0.3], jnp.float32)
    v = np.asarray(segment_var(big, jnp.array([0, 0, 1, 1]), 2))
    np.testing.assert_allclose(v, [0.01, 0.09], rtol=2e-2)


def test_var_std_mask_and_integer_input():
    ids = jnp.array([0, 0, 0, 1])
    x = jnp.array([1.0, 3.0, jnp.inf, 5.0])
    mask = jnp.array([True, True, False, False])
    np.testing.assert_allclose(np.asarray(segment_var(x, ids, 2, mask=mask)), [1.0, 0.0])
    std = np.asarray(segment_std(x, ids, 2, mask=mask))
    np.testing.assert_allclose(std, [np.sqrt(1.0 + 1e-5), 0.0], rtol=1e-6)
    out = np.asarray(segment_var(jnp.array([1, 2, 3]), jnp.array([0, 0, 0]), 1))
    np.testing.assert_allclose(out, [2.0 / 3.0], rtol=1e-6)


@pytest.mark.parametrize("how", sorted(CLASSES))
def test_gradients_are_finite(how):
    module = CLASSES[how]()
    ids = jnp.asarray(IDS)

    def loss(x):
        return jnp.sum(module(x, ids, N_SEG) ** 2)

    g = np.asarray(jax.jit(jax.grad(loss))(jnp.asarray(X)))
    assert np.all(np.isfinite(g)), how
    # Constant input: zero variance everywhere, still finite.
    g = np.asarray(jax.grad(loss)(jnp.ones_like(jnp.asarray(X))))
    assert np.all(np.isfinite(g)), how


def test_softmax_temperature_limits():
    x, ids = jnp.asarray(X), jnp.asarray(IDS)
    mean = np.asarray(MeanAggregation()(x, ids, N_SEG))
    np.testing.assert_allclose(np.asarray(SoftmaxAggregation(t=0.0)(x, ids, N_SEG)), mean,
                               rtol=1e-5, atol=1e-6)
    hot = np.asarray(SoftmaxAggregation(t=1e4)(x, ids, N_SEG))
    np.testing.assert_allclose(hot, np.asarray(MaxAggregation()(x, ids, N_SEG)), atol=1e-4)
    cold = np.asarray(SoftmaxAggregation(t=-1e4)(x, ids, N_SEG))
    np.testing.assert_allclose(cold, np.asarray(MinAggregation()(x, ids, N_SEG)), atol=1e-4)
    assert np.all(np.isfinite(hot)) and np.all(hot[[1, 5]] == 0)
    np.testing.assert_allclose(np.asarray(SoftmaxAggregation(t=2.5)(x, ids, N_SEG)),
                               np_reduce(X, IDS, N_SEG, "softmax", t=2.5), rtol=1e-5,
                               atol=1e-6)


def test_learnable_temperature_gets_a_gradient():
    module = SoftmaxAggregation(t=1.0, learn=True, channels=3)
    assert isinstance(module.t, nnx.Param) and module.t[...].shape == (3,)
    x, ids = jnp.asarray(X), jnp.asarray(IDS)

    def loss(m):
        return jnp.sum(m(x, ids, N_SEG) ** 2)

    grads = nnx.grad(loss)(module)
    g = np.asarray(grads["t"][...])
    assert g.shape == (3,) and np.all(np.isfinite(g)) and np.all(np.abs(g) > 0)
    module.t[...] = jnp.array([0.0, 2.5, 1.0])  # per-channel temperatures
    out = np.asarray(module(x, ids, N_SEG))
    np.testing.assert_allclose(out[:, 0], np_reduce(X, IDS, N_SEG, "mean")[:, 0], atol=1e-6)
    np.testing.assert_allclose(out[:, 1], np_reduce(X, IDS, N_SEG, "softmax", 2.5)[:, 1],
                               rtol=1e-5, atol=1e-6)
    # semi_grad leaves the forward pass unchanged.
    semi = SoftmaxAggregation(t=2.5, semi_grad=True)
    np.testing.assert_allclose(np.asarray(semi(x, ids, N_SEG))[:, 1], out[:, 1], rtol=1e-6)
    with pytest.raises(ValueError, match="channels"):
        SoftmaxAggregation(channels=3)
    with pytest.raises(ValueError, match="last axis 3"):
        module(jnp.ones((4, 2)), jnp.zeros(4, jnp.int32), 1)


def test_semi_grad_weights_are_constants():
    ids = jnp.array([0, 0])
    x = jnp.array([[1.0], [2.0]])
    g = np.asarray(jax.grad(lambda z: SoftmaxAggregation(semi_grad=True)(z, ids, 1).sum())(x))
    w = np.exp([1.0, 2.0]) / np.exp([1.0, 2.0]).sum()
    np.testing.assert_allclose(g[:, 0], w, rtol=1e-6)  # d/dx sum(w * x) with w fixed


def test_multi_aggregation_shape_content_and_modes():
    x, ids = jnp.asarray(X), jnp.asarray(IDS)
    multi = MultiAggregation(["mean", MaxAggregation(), "std"])
    out = np.asarray(multi(x, ids, N_SEG))
    assert out.shape == (N_SEG, 9)
    for k, how in enumerate(["mean", "max", "std"]):
        np.testing.assert_allclose(out[:, 3 * k:3 * k + 3], np_reduce(X, IDS, N_SEG, how),
                                   rtol=1e-5, atol=1e-6)
    assert multi.name == ("mean", "max", "std")
    assert isinstance(resolve(["sum", "min"]), MultiAggregation)
    summed = np.asarray(MultiAggregation(["sum", "max"], mode="sum")(x, ids, N_SEG))
    np.testing.assert_allclose(summed, np_reduce(X, IDS, N_SEG, "sum")
                               + np_reduce(X, IDS, N_SEG, "max"), rtol=1e-5, atol=1e-6)
    # Learnable children are nnx submodules: their Param shows up in the state.
    learn = MultiAggregation(["sum", SoftmaxAggregation(learn=True)])
    assert len(jax.tree.leaves(nnx.state(learn, nnx.Param))) == 1
    with pytest.raises(ValueError, match="non-empty"):
        MultiAggregation([])
    with pytest.raises(ValueError, match="feature axis"):
        multi(jnp.ones(3), jnp.zeros(3, jnp.int32), 1)


def test_traced_index_without_num_segments_names_the_argument():
    module = MeanAggregation()
    with pytest.raises(ValueError, match="num_segments.*size="):
        jax.jit(lambda x, i: module(x, i))(jnp.asarray(X), jnp.asarray(IDS))
    # With a static num_segments it compiles; jit with a closed-over index infers.
    out = jax.jit(lambda x, i: module(x, i, N_SEG))(jnp.asarray(X), jnp.asarray(IDS))
    assert out.shape == (N_SEG, 3)
    with pytest.raises(ValueError, match="num_segments must be a static"):
        jax.jit(lambda x, n: module(x, jnp.asarray(IDS), n))(jnp.asarray(X), 6)


def test_resolve_errors_and_passthrough():
    m = SoftmaxAggregation(learn=True)
    assert resolve(m) is m
    assert isinstance(resolve("softmax", t=0.5), SoftmaxAggregation)
    with pytest.raises(ValueError, match="unknown aggregation 'median'"):
        resolve("median")
    with pytest.raises(TypeError):
        resolve(3)


def test_readout_over_a_batch_vector():
    # Two graphs of 3 and 2 nodes, plus an empty padding graph.
    h = jnp.arange(10.0).reshape(5, 2)
    batch = jnp.array([0, 0, 0, 1, 1])
    out = np.asarray(MultiAggregation(["sum", "mean"])(h, batch, 3))
    np.testing.assert_allclose(out, [[6, 9, 2, 3], [14, 16, 7, 8], [0, 0, 0, 0]])


# ------------------------------------------------------------- MessagePassing
EI = np.array([[0, 1, 2, 2, 3, 0, 1], [1, 2, 0, 1, 1, 3, 3]])  # node 4 has no in-edges
NX = RNG.normal(size=(5, 2)).astype(np.float32)


class Neighbours(MessagePassing):
    def __call__(self, x, edge_index):
        return self.propagate(edge_index, x)


def dense_neighbours(how, t=1.0):
    return np_reduce(NX[EI[0]], EI[1], 5, how, t=t)


@pytest.mark.parametrize("how", ["var", "std", "softmax"])
def test_message_passing_with_new_aggregations(how):
    layer = Neighbours(how)
    assert layer.aggr == how
    out = np.asarray(layer(jnp.asarray(NX), jnp.asarray(EI)))
    np.testing.assert_allclose(out, dense_neighbours(how), rtol=1e-5, atol=1e-6)
    assert np.all(out[4] == 0)
    jitted = nnx.jit(lambda m, x, e: m(x, e))(layer, jnp.asarray(NX), jnp.asarray(EI))
    np.testing.assert_allclose(np.asarray(jitted), out, rtol=1e-6, atol=1e-7)


def test_message_passing_multi_and_module_aggregations():
    x, ei = jnp.asarray(NX), jnp.asarray(EI)
    layer = Neighbours(["mean", "max", "softmax"])
    assert layer.aggr == ("mean", "max", "softmax")
    out = np.asarray(layer(x, ei))
    assert out.shape == (5, 6)
    want = np.concatenate([dense_neighbours(h) for h in ("mean", "max", "softmax")], axis=1)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)
    # aggr_kwargs reach the built module.
    layer = Neighbours("softmax", aggr_kwargs={"t": 3.0})
    np.testing.assert_allclose(np.asarray(layer(x, ei)), dense_neighbours("softmax", 3.0),
                               rtol=1e-5, atol=1e-6)
    # A learnable module is a submodule: its temperature is a Param of the layer.
    layer = Neighbours(SoftmaxAggregation(t=0.5, learn=True))
    assert layer.aggr == "softmax" and isinstance(layer.aggr_module, Aggregation)
    params = nnx.state(layer, nnx.Param)
    assert len(jax.tree.leaves(params)) == 1

    def loss(m):
        return jnp.sum(m(x, ei) ** 2)

    grads = nnx.jit(nnx.grad(loss))(layer)
    g = np.asarray(grads["aggr_module"]["t"][...])
    assert np.all(np.isfinite(g)) and np.all(g != 0)
    np.testing.assert_allclose(np.asarray(layer(x, ei)), dense_neighbours("softmax", 0.5),
                               rtol=1e-5, atol=1e-6)


class FusedSum(MessagePassing):
    """Counts calls of the fused hook."""

    calls = []

    def __call__(self, x, edge_index):
        return self.propagate(edge_index, x)

    def message_and_aggregate(self, adj, x_src, x_dst, num_nodes):
        FusedSum.calls.append(self.aggr)
        src, dst = adj.edge_index
        return jnp.zeros((num_nodes, x_src.shape[0])).at[dst, src].add(1.0) @ x_src


def test_fused_path_only_for_plain_sum_or_mean():
    order = np.lexsort((EI[0], EI[1]))
    adj = Adjacency.from_edge_index(EI[:, order], 5)
    x = jnp.asarray(NX)
    FusedSum.calls.clear()
    np.testing.assert_allclose(np.asarray(FusedSum(SumAggregation())(x, adj)),
                               dense_neighbours("sum"), rtol=1e-5, atol=1e-6)
    assert FusedSum.calls == ["sum"]
    for aggr in ("std", ["sum", "max"], SoftmaxAggregation()):
        out = np.asarray(FusedSum(aggr)(x, adj))  # generic path, correct result
        assert out.shape[0] == 5
    assert FusedSum.calls == ["sum"]

"""ChebConv, SGConv and APPNP: dense references, symmetries, jit, gradients, caches.

The references are written from the maths (PyG semantics) with numpy in float64:
``A[i, j]`` is the summed weight of all edges ``j -> i``; they never call
gnncore helpers and only read the layer's own parameters. Conventions checked
against torch_geometric 2.8.1 once, outside the test suite (directed graphs with
self-loops, duplicate edges and weights; max difference about 1e-6 relative):

- ChebConv removes self-loops and takes the degree at the edge *source*
  (``D_jj = sum_i A_ij``), ``L_rw = I - A D^-1``; lambda_max defaults to 2.
- SGConv / APPNP use GCN's normalisation (degree at the target, one self-loop
  per node, an existing loop keeps its weight).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from graphs import edge_weight, features, random_graph, randomise_bias, undirected, union

from gnncore.conv.appnp import APPNP
from gnncore.conv.cheb import ChebConv
from gnncore.conv.sg import SGConv
from gnncore.sparse import Adjacency, SparseFeatures

RTOL = 1e-5
F_IN = 5


# --------------------------------------------------------------------------- graphs
def _graphs():
    """name -> (num_nodes, edge_index). The awkward components share one union
    (one compile per layer); whole-graph edge cases are separate inputs."""
    components = [
        (9, random_graph(0, 8, 16)),                     # node 8 is isolated
        (6, random_graph(1, 6, 25, loops=4, dups=5)),    # dense, many loops / dups
        (7, undirected(2, 7, 9)),                        # symmetric
        # isolated nodes 3 and 5, duplicate edges, a duplicated loop, a plain loop
        (6, np.array([[0, 1, 1, 2, 0, 4, 4, 4, 2, 1],
                      [1, 0, 0, 0, 2, 4, 4, 1, 2, 2]])),
        (5, np.array([[1, 2, 3, 4], [0, 0, 0, 0]])),     # star: 1..4 have no in-edges
        (1, np.zeros((2, 0), np.int64)),                 # isolated node
        (1, np.array([[0, 0], [0, 0]])),                 # node with only (two) loops
        (2, np.array([[0, 0], [1, 1]])),                 # duplicate edge only
    ]
    return {
        "union": union(components, 0),
        "single_node": (1, np.zeros((2, 0), np.int64)),
        "single_node_loop": (1, np.array([[0], [0]])),
        "no_edges": (4, np.zeros((2, 0), np.int64)),
    }


GRAPHS = _graphs()
GRAPH_IDS = sorted(GRAPHS)


# ------------------------------------------------------------------------ helpers
def _run(graphdef, state, args, kwargs):
    module = nnx.merge(graphdef, state)
    out = module(*args, **kwargs)
    return out, nnx.state(module)


def _run_many(graphdef, state, cases, kwargs):
    module = nnx.merge(graphdef, state)
    return [module(*args, **kwargs) for args in cases]


_OPTS = {"xla_backend_optimization_level": 0}
_run_jit = jax.jit(_run, static_argnums=0, compiler_options=_OPTS)
_run_many_jit = jax.jit(_run_many, static_argnums=0, compiler_options=_OPTS)


def apply(module, *args, **kwargs):
    """``module(*args, **kwargs)`` under ``jax.jit`` (arrays traced, ``None``
    allowed); state changes are written back."""
    graphdef, state = nnx.split(module)
    out, new_state = _run_jit(graphdef, state, args, kwargs)
    nnx.update(module, new_state)
    return np.asarray(out)


def apply_many(module, cases, **kwargs):
    """``[module(*args, **kwargs) for args in cases]`` as one compiled program
    (one compile per test instead of one per graph shape); a pure forward."""
    graphdef, state = nnx.split(module)
    return [np.asarray(out) for out in _run_many_jit(graphdef, state, tuple(cases), kwargs)]


def P(v):
    return np.asarray(v[...] if isinstance(v, nnx.Variable) else v, dtype=np.float64)


def adjacency(edge_index, n, weight=None):
    """Dense ``A[i, j]`` = summed weight of the edges ``j -> i``."""
    ei = np.asarray(edge_index)
    A = np.zeros((n, n))
    w = np.ones(ei.shape[1]) if weight is None else np.asarray(weight, np.float64)
    np.add.at(A, (ei[1], ei[0]), w)
    return A


def check(actual, expected, rtol=RTOL):
    """Max abs error within ``rtol`` times the size of the expected values."""
    actual = np.asarray(actual, dtype=np.float64)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    assert np.all(np.isfinite(actual))
    err = float(np.max(np.abs(actual - expected), initial=0.0))
    scale = max(1.0, float(np.max(np.abs(expected), initial=0.0)))
    assert err <= rtol * scale, f"max abs error {err:.3g} > {rtol * scale:.3g}"
    return err / scale


# ------------------------------------------------------------------- references
def ref_cheb(layer, x, ei, w=None, lambda_max=None):
    x = np.asarray(x, np.float64)
    n = x.shape[0]
    ei = np.asarray(ei)
    w = np.ones(ei.shape[1]) if w is None else np.asarray(w, np.float64)
    keep = ei[0] != ei[1]                                  # self-loops removed
    A = adjacency(ei[:, keep], n, w[keep])
    deg = A.sum(axis=0)                                    # at the source j
    inv = np.divide(1.0, deg, out=np.zeros(n), where=deg > 0)
    if layer.normalization is None:
        L = np.diag(deg) - A
    elif layer.normalization == "sym":
        L = np.eye(n) - np.sqrt(inv)[:, None] * A * np.sqrt(inv)[None, :]
    else:
        L = np.eye(n) - A * inv[None, :]
    lam = 2.0 if lambda_max is None else float(lambda_max)
    L_hat = 2.0 * L / lam - np.eye(n)
    terms = [x, L_hat @ x]
    while len(terms) < layer.K:
        terms.append(2.0 * L_hat @ terms[-1] - terms[-2])
    out = sum(t @ P(lin.kernel) for t, lin in zip(terms, layer.lins))
    return out if layer.bias is None else out + P(layer.bias)


def gcn_matrix(ei, n, w=None, add_self_loops=True):
    r""":math:`\hat D^{-1/2} \hat A \hat D^{-1/2}`, degree at the target."""
    ei = np.asarray(ei)
    w = np.ones(ei.shape[1]) if w is None else np.asarray(w, np.float64)
    A = adjacency(ei, n, w)
    if add_self_loops:
        diag = np.ones(n)
        loop = ei[0] == ei[1]
        diag[ei[0, loop]] = w[loop]          # an existing loop keeps its weight
        A[np.arange(n), np.arange(n)] = diag
    deg = A.sum(axis=1)
    dis = np.divide(1.0, np.sqrt(np.maximum(deg, 0)), out=np.zeros(n), where=deg > 0)
    return dis[:, None] * A * dis[None, :]


def ref_sg(layer, x, ei, w=None):
    x = np.asarray(x, np.float64)
    M = gcn_matrix(ei, x.shape[0], w, layer.add_self_loops)
    out = np.linalg.matrix_power(M, layer.K) @ x @ P(layer.lin.kernel)
    return out if layer.lin.bias is None else out + P(layer.lin.bias)


def ref_appnp(layer, x, ei, w=None):
    h = np.asarray(x, np.float64)
    M = gcn_matrix(ei, h.shape[0], w, layer.add_self_loops)
    z = h
    for _ in range(layer.K):
        z = (1 - layer.alpha) * M @ z + layer.alpha * h
    return z


def _j(a, dtype=None):
    return None if a is None else jnp.asarray(a, dtype)


def _cases(seed):
    """``(x, edge_index, weight or None)`` for every graph, unweighted and
    weighted (numpy), and the same as jax arrays."""
    cases = []
    for k, name in enumerate(GRAPH_IDS):
        n, ei = GRAPHS[name]
        x = features(seed + k, n, F_IN)
        cases += [(x, ei, None), (x, ei, edge_weight(seed + 50 + k, ei))]
    return cases, [(_j(x), _j(ei, jnp.int32), _j(w)) for x, ei, w in cases]


# ================================================================ dense references
@pytest.mark.parametrize("K", [1, 2, 3])
@pytest.mark.parametrize("normalization", [None, "sym", "rw"], ids=["none", "sym", "rw"])
def test_cheb_matches_dense(normalization, K):
    layer = randomise_bias(ChebConv(F_IN, 4, K, normalization=normalization,
                                    rngs=nnx.Rngs(K)), K)
    cases, args = _cases(10 * K)
    # lambda_max per case (positional): required for None; for sym / rw the
    # default (2) and, on the weighted union graph, an explicit value too.
    lams = [3.7 if normalization is None else None] * len(cases)
    if normalization is not None:
        cases.append(cases[-1])
        lams.append(1.3)
    args = [(*a, None if lam is None else jnp.float32(lam))
            for a, lam in zip(args + args[-1:], lams)]
    for (x, ei, w), lam, out in zip(cases, lams, apply_many(layer, args)):
        check(out, ref_cheb(layer, x, ei, w, lam))


def test_cheb_without_bias_and_python_lambda_max():
    layer = ChebConv(F_IN, 3, 2, normalization=None, bias=False, rngs=nnx.Rngs(0))
    assert layer.bias is None
    n, ei = GRAPHS["union"]
    x = features(5, n, F_IN)
    check(apply(layer, _j(x), _j(ei, jnp.int32), lambda_max=4.5),
          ref_cheb(layer, x, ei, None, 4.5))


def test_cheb_hand_computed_path():
    """A 3-node path 0 - 1 - 2 with K=2, sym, lambda_max=2: L_hat = -D^-1/2 A D^-1/2."""
    layer = ChebConv(1, 1, 2, bias=False, rngs=nnx.Rngs(0))
    layer.lins[0].kernel[...] = jnp.zeros((1, 1))
    layer.lins[1].kernel[...] = jnp.ones((1, 1))
    ei = jnp.array([[0, 1, 1, 2, 1], [1, 0, 2, 1, 1]], jnp.int32)  # plus a loop: removed
    out = apply(layer, jnp.array([[1.0], [2.0], [4.0]]), ei)
    s = 1 / np.sqrt(2)
    check(out, -np.array([[2 * s], [s + 4 * s], [2 * s]]))


# out < in propagates the transformed features, out > in the raw ones
@pytest.mark.parametrize("K,add_self_loops,out_features,bias",
                         [(1, True, 3, True), (2, True, 7, False), (3, True, 3, True),
                          (2, False, 3, False), (3, False, 7, True)])
def test_sg_matches_dense(K, add_self_loops, out_features, bias):
    layer = SGConv(F_IN, out_features, K=K, add_self_loops=add_self_loops, bias=bias,
                   rngs=nnx.Rngs(K))
    assert (layer.lin.bias is not None) == bias
    cases, args = _cases(20 * K)
    for (x, ei, w), out in zip(cases, apply_many(layer, args)):
        check(out, ref_sg(layer, x, ei, w))


@pytest.mark.parametrize("K,alpha,add_self_loops",
                         [(0, 0.1, True), (1, 0.1, True), (2, 0.3, True), (3, 0.1, True),
                          (3, 0.2, False)])
def test_appnp_matches_dense(K, alpha, add_self_loops):
    layer = APPNP(K, alpha, add_self_loops=add_self_loops)
    cases, args = _cases(30 + K)
    for (x, ei, w), out in zip(cases, apply_many(layer, args)):
        check(out, ref_appnp(layer, x, ei, w))


# ================================================================ shared modules
def _cheb_call(lam):
    return lambda m, x, ei, w: m(x, ei, w, lambda_max=lam)


def _plain_call(m, x, ei, w):
    return m(x, ei, w)


LAYERS = {
    "cheb_none_k3": (lambda r: ChebConv(F_IN, 4, 3, normalization=None, rngs=r),
                     _cheb_call(4.0)),
    "cheb_sym_k3": (lambda r: ChebConv(F_IN, 4, 3, rngs=r), _cheb_call(None)),
    "cheb_rw_k2": (lambda r: ChebConv(F_IN, 4, 2, normalization="rw", rngs=r),
                   _cheb_call(1.5)),
    "sg_k2": (lambda r: SGConv(F_IN, 3, K=2, rngs=r), _plain_call),
    "sg_k3_wide_no_loops": (lambda r: SGConv(F_IN, 7, K=3, add_self_loops=False, rngs=r),
                            _plain_call),
    "appnp_k3": (lambda r: APPNP(3, 0.2, rngs=r), _plain_call),
    "appnp_k2_dropout": (lambda r: APPNP(2, 0.1, dropout=0.4, rngs=r), _plain_call),
}


@functools.partial(jax.jit, static_argnums=(0, 1), compiler_options=_OPTS)
def _pure_call(call, graphdef, state, *args):
    return call(nnx.merge(graphdef, state), *args)


def _jit_call(call, module, *args):
    """A pure (eval, no state change) forward under ``jax.jit``."""
    return _pure_call(call, *nnx.split(module), *args)


def build(name, seed=0):
    make, call = LAYERS[name]
    return randomise_bias(make(nnx.Rngs(params=seed, dropout=seed + 1)), seed + 7), call


def _sample(seed=0):
    n, ei = GRAPHS["union"]
    return (jnp.asarray(features(seed, n, F_IN)), jnp.asarray(ei, jnp.int32),
            jnp.asarray(edge_weight(seed, ei)))


def _sorted_by_target(ei, w):
    order = np.lexsort((ei[0], ei[1]))
    return ei[:, order], w[order]


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_adjacency_input_matches_edge_index(name):
    module, call = build(name)
    module.eval()
    n, ei = GRAPHS["union"]
    ei, w = _sorted_by_target(ei, edge_weight(1, ei))
    x = jnp.asarray(features(2, n, F_IN))
    adj = Adjacency.from_edge_index(ei, n)
    via_list = _jit_call(call, module, x, jnp.asarray(ei, jnp.int32), jnp.asarray(w))
    via_adj = _jit_call(call, module, x, adj, jnp.asarray(w))
    check(via_adj, np.asarray(via_list, np.float64))


@pytest.mark.parametrize("name", ["appnp_k3", "cheb_sym_k3", "sg_k2", "sg_k3_wide_no_loops"])
def test_sparse_features_match_dense(name):
    module, call = build(name)
    module.eval()
    x, ei, w = _sample(3)
    x = jnp.where(x > 0.5, x, 0.0)
    check(_jit_call(call, module, SparseFeatures.from_dense(np.asarray(x)), ei, w),
          np.asarray(_jit_call(call, module, x, ei, w), np.float64))


# ============================================================ symmetries
N_PAD, E_PAD = 12, 36


def _padded_graph(seed):
    """A random graph at one fixed shape: loops, duplicates, isolated nodes; unused
    edge slots are self-loops on the last node."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, N_PAD))
    e = int(rng.integers(0, E_PAD - 6))
    ei = np.full((2, E_PAD), N_PAD - 1, np.int64)
    edges = rng.integers(0, n, (2, e))
    loops = np.repeat(rng.integers(0, n, 2)[None], 2, axis=0)
    edges = np.concatenate([edges, loops, edges[:, :2]], axis=1)
    ei[:, :edges.shape[1]] = edges
    return (features(seed, N_PAD, F_IN), ei, edge_weight(seed, ei),
            rng.permutation(N_PAD), rng.permutation(E_PAD))


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_permutation_equivariance_and_edge_order_invariance(name):
    module, call = build(name)
    module.eval()
    step = functools.partial(_jit_call, call)
    for seed in range(4):
        x, ei, w, perm, cols = _padded_graph(seed)
        out = np.asarray(step(module, _j(x), _j(ei, jnp.int32), _j(w)), np.float64)
        new_id = np.argsort(perm)
        out_p = step(module, _j(x[perm]), _j(new_id[ei], jnp.int32), _j(w))
        check(out_p, out[perm])
        out_s = step(module, _j(x), _j(ei[:, cols], jnp.int32), _j(w[cols]))
        check(out_s, out)


# ================================================================ jit and grads
@pytest.mark.parametrize("name", sorted(LAYERS))
def test_eval_forward_same_eager_nnx_jit_and_jax_jit(name):
    module, call = build(name)
    module.eval()
    args = _sample()
    eager = np.asarray(call(module, *args), np.float64)
    check(nnx.jit(call)(module, *args), eager)
    check(jax.jit(call)(module, *args), eager)


def test_appnp_train_forward_same_eager_and_nnx_jit():
    eager_mod, call = build("appnp_k2_dropout")
    jit_mod, _ = build("appnp_k2_dropout")
    args = _sample()
    step = nnx.jit(call)
    outs = []
    for _ in range(2):
        out = np.asarray(call(eager_mod, *args), np.float64)
        check(step(jit_mod, *args), out)
        outs.append(out)
    assert not np.allclose(outs[0], outs[1])  # a fresh mask per call


@pytest.mark.parametrize("name", sorted(n for n in LAYERS if not n.startswith("appnp")))
def test_every_parameter_gets_a_finite_nonzero_gradient(name):
    module, call = build(name)
    module.eval()
    args = _sample()
    probe = jnp.asarray(np.random.default_rng(1).normal(size=(args[0].shape[0], 7)))

    def loss_fn(m):
        out = call(m, *args)
        return jnp.sum(out * probe[:, :out.shape[1]])

    flat = nnx.to_flat_state(nnx.jit(nnx.grad(loss_fn))(module))
    assert len(flat) == len(jax.tree.leaves(nnx.state(module, nnx.Param))) > 0
    for path, var in flat:
        g = np.asarray(var.get_value())
        assert np.all(np.isfinite(g)), path
        assert np.any(g != 0), f"zero gradient for {'/'.join(map(str, path))}"


@pytest.mark.parametrize("name", ["appnp_k3", "cheb_none_k3", "sg_k2"])
def test_gradients_reach_features_and_edge_weights(name):
    module, call = build(name)
    module.eval()
    x, ei, w = _sample()
    graphdef, state = nnx.split(module)
    grad = jax.jit(jax.grad(lambda x, w, state: jnp.sum(jnp.sin(
        call(nnx.merge(graphdef, state), x, ei, w))), argnums=(0, 1)),
        compiler_options=_OPTS)
    gx, gw = grad(x, w, state)
    assert np.all(np.isfinite(gx)) and np.any(gx != 0)
    assert np.all(np.isfinite(gw)) and np.any(gw != 0)


def test_cheb_gradient_of_lambda_max():
    layer = ChebConv(F_IN, 2, 3, normalization=None, rngs=nnx.Rngs(0))
    x, ei, w = _sample()
    graphdef, state = nnx.split(layer)
    g = jax.jit(jax.grad(lambda lam, state: jnp.sum(
        nnx.merge(graphdef, state)(x, ei, w, lambda_max=lam))),
        compiler_options=_OPTS)(jnp.float32(5.0), state)
    assert np.isfinite(g) and g != 0


# ======================================================================= errors
def test_cheb_lambda_max_errors():
    layer = ChebConv(F_IN, 3, 2, normalization=None, rngs=nnx.Rngs(0))
    x, ei, w = _sample()
    with pytest.raises(ValueError, match="lambda_max"):
        layer(x, ei)
    with pytest.raises(ValueError, match="lambda_max"):
        nnx.jit(lambda m, x, ei: m(x, ei))(layer, x, ei)
    with pytest.raises(ValueError, match="lambda_max > 0"):
        layer(x, ei, lambda_max=0.0)
    with pytest.raises(ValueError, match="scalar"):
        layer(x, ei, lambda_max=jnp.ones(2))
    # a traced lambda_max is fine
    out = nnx.jit(lambda m, x, ei, lam: m(x, ei, lambda_max=lam))(layer, x, ei, 3.0)
    check(out, ref_cheb(layer, x, ei, None, 3.0))
    for normalization in ("sym", "rw"):  # default 2.0
        lay = ChebConv(F_IN, 3, 2, normalization=normalization, rngs=nnx.Rngs(0))
        check(lay(x, ei, w), np.asarray(lay(x, ei, w, lambda_max=2.0), np.float64))


def test_constructor_errors():
    with pytest.raises(ValueError, match="K >= 1"):
        ChebConv(F_IN, 3, 0, rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match="normalization"):
        ChebConv(F_IN, 3, 2, normalization="lap", rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match="K >= 0"):
        SGConv(F_IN, 3, K=-1, rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match="K >= 0"):
        APPNP(-1, 0.1)
    with pytest.raises(ValueError, match="rngs"):
        APPNP(2, 0.1, dropout=0.5)


# ======================================================================= caches
def test_sg_cached_first_eager_call_fills_and_is_reused():
    layer = SGConv(F_IN, 3, K=2, cached=True, rngs=nnx.Rngs(0))
    x, ei, w = _sample()
    first = np.asarray(layer(x, ei, w), np.float64)
    check(first, ref_sg(layer, x, ei, w))
    # the cache stands for A^K x: other features / edges are ignored now
    check(layer(x * 3.0 + 1.0, ei[:, :5], w[:5]), first)
    # compiled: the cache is a traced input, not a baked constant
    step = nnx.jit(_plain_call)
    check(step(layer, x, ei, w), first)
    x2 = x[::-1]
    layer.precompute(x2, ei, w)
    check(step(layer, x, ei, w), ref_sg(layer, x2, ei, w))
    with pytest.raises(ValueError, match="nodes"):
        layer(x[:-1], ei, w)
    # no gradient flows into the cache; the linear layer still learns
    grads = nnx.to_flat_state(nnx.grad(lambda m: jnp.sum(m(x, ei, w) ** 2))(layer))
    assert all(np.any(np.asarray(v.get_value()) != 0) for _, v in grads)
    layer.clear_cache()
    check(layer(x, ei, w), first)


def test_sg_cached_errors_under_a_trace():
    layer = SGConv(F_IN, 3, K=2, cached=True, rngs=nnx.Rngs(0))
    x, ei, w = _sample()
    with pytest.raises(ValueError, match="precompute"):
        nnx.jit(_plain_call)(layer, x, ei, w)
    with pytest.raises(ValueError, match="eagerly"):
        nnx.jit(lambda m, x, ei: m.precompute(x, ei))(layer, x, ei)
    with pytest.raises(ValueError, match="precompute"):
        jax.jit(lambda x: layer(x, ei, w))(x)
    assert layer._cached_x.get_value() is None  # nothing leaked into the cache
    layer.precompute(x, ei, w)
    check(jax.jit(lambda x: layer(x, ei, w))(x), ref_sg(layer, x, ei, w))


def test_appnp_cached():
    layer = APPNP(3, 0.2, cached=True)
    x, ei, w = _sample()
    with pytest.raises(ValueError, match="precompute_norm"):
        nnx.jit(_plain_call)(layer, x, ei, w)
    with pytest.raises(ValueError, match="eagerly"):
        nnx.jit(lambda m, ei: m.precompute_norm(ei, 3))(layer, ei)
    assert layer._cache_weight.get_value() is None
    first = np.asarray(layer(x, ei, w), np.float64)  # eager: fills the cache
    check(first, ref_appnp(layer, x, ei, w))
    # the normalisation is reused (given edges ignored), the features are not
    x2 = x * 2.0 - 1.0
    check(layer(x2, ei[:, :4], None), ref_appnp(layer, x2, ei, w))
    check(nnx.jit(_plain_call)(layer, x2, ei, None), ref_appnp(layer, x2, ei, w))
    with pytest.raises(ValueError, match="nodes"):
        layer(x[:-1], ei, w)
    n, _ = GRAPHS["union"]
    eis, ws = _sorted_by_target(np.asarray(ei), np.asarray(w))
    with pytest.raises(ValueError, match="kind"):
        layer(x, Adjacency.from_edge_index(eis, n), jnp.asarray(ws))
    # an Adjacency cache, filled explicitly
    layer = APPNP(3, 0.2, cached=True)
    adj = Adjacency.from_edge_index(eis, n)
    layer.precompute_norm(adj, n, jnp.asarray(ws))
    check(nnx.jit(_plain_call)(layer, x, adj, None), ref_appnp(layer, x, eis, ws))


# ====================================================================== dropout
def test_appnp_dropout_drops_and_rescales_edge_weights():
    """K=1, alpha=0, no self-loops, every node has exactly one in-edge of
    normalised weight 1: a node's output is 0 (edge dropped) or x_src / (1 - p)."""
    n, p = 64, 0.25
    layer = APPNP(1, 0.0, dropout=p, add_self_loops=False, rngs=nnx.Rngs(dropout=0))
    ei = jnp.asarray(np.stack([(np.arange(n) + 1) % n, np.arange(n)]), jnp.int32)
    x = jnp.asarray(np.arange(1, n + 1, dtype=np.float32)[:, None])
    kept = np.asarray(x)[(np.arange(n) + 1) % n] / (1 - p)
    out = apply(layer, x, ei)
    is_kept = np.isclose(out, kept, rtol=1e-6)
    assert np.all(is_kept | (out == 0))
    assert 0 < is_kept.sum() < n
    layer.eval()
    check(apply(layer, x, ei), np.asarray(x)[(np.arange(n) + 1) % n].astype(np.float64))

"""LayerNorm / GraphNorm, global pools, TopKPooling / SAGPooling, coalesce /
to_undirected.

References are written from the maths (PyG semantics) in float64 numpy and only
read the layers' own parameters. One batched graph is shared by most tests:
graphs of 4, 3, 0 and 5 nodes (graph 2 is empty) followed by two padding nodes
(``mask`` False; one with an in-range graph id, one with id 4 = num_graphs)
and padding edges, one of which links a padding node to a real node.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from graphs import randomise_affine

from gnncore.norm import GraphNorm, LayerNorm
from gnncore.pool import (
    SAGPooling,
    TopKPooling,
    global_add_pool,
    global_max_pool,
    global_mean_pool,
    global_min_pool,
)
from gnncore.utils import coalesce, to_undirected

F = 4
B = 4
SIZES = (4, 3, 0, 5)
ATOL = 2e-5


def _data(seed=0):
    rng = np.random.default_rng(seed)
    batch = np.concatenate([np.full(n, g) for g, n in enumerate(SIZES)] + [[0, B]])
    n_real = sum(SIZES)
    mask = np.arange(len(batch)) < n_real
    x = rng.normal(size=(len(batch), F)).astype(np.float32)
    x[n_real:] = 50.0  # padding that would dominate any statistic it entered
    edges, start = [], 0
    for n in SIZES:
        for _ in range(2 * n):
            edges.append((start + rng.integers(n), start + rng.integers(n)))
        start += n
    edges += [(4, 5), (4, 5), (5, 5), (12, 12), (13, 13), (12, 0), (0, 12)]
    ei = np.asarray(edges, np.int32).T
    ei = ei[:, rng.permutation(ei.shape[1])]
    return x, ei, batch.astype(np.int32), mask


X, EI, BATCH, MASK = _data()
N = X.shape[0]


def P(v):
    return np.asarray(v[...], np.float64)


def check(actual, expected, atol=ATOL):
    actual = np.asarray(actual, np.float64)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    np.testing.assert_allclose(actual, expected, atol=atol, rtol=0)


_FAST = {"xla_backend_optimization_level": 0}


def fast(fn):
    """``jax.jit`` of ``fn(module, *args)`` with XLA's backend optimisations off:
    these programs are tiny, so compiling them is what costs time. (Eager mode
    compiles every primitive separately; it is exercised once per layer.)"""
    def run(graphdef, state, *args):
        return fn(nnx.merge(graphdef, state), *args)

    jitted = jax.jit(run, static_argnums=0, compiler_options=_FAST)
    return lambda module, *args: jitted(*nnx.split(module), *args)


# --------------------------------------------------------------- norm references
def ref_layer_norm_graph(x, batch, mask, scale, bias, eps=1e-5):
    x = np.asarray(x, np.float64)
    out = np.zeros_like(x)
    for g in np.unique(batch[mask]):
        rows = (batch == g) & mask
        mu = x[rows].mean()
        var = ((x[rows] - mu) ** 2).mean()
        out[rows] = (x[rows] - mu) / np.sqrt(var + eps)
    return (out * scale + bias)[mask]


def ref_layer_norm_node(x, scale, bias, eps=1e-5):
    x = np.asarray(x, np.float64)
    mu = x.mean(1, keepdims=True)
    var = ((x - mu) ** 2).mean(1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * scale + bias


def ref_graph_norm(x, batch, mask, weight, bias, alpha, eps=1e-5):
    x = np.asarray(x, np.float64)
    out = np.zeros_like(x)
    for g in np.unique(batch[mask]):
        rows = (batch == g) & mask
        centred = x[rows] - alpha * x[rows].mean(0)
        out[rows] = weight * centred / np.sqrt((centred ** 2).mean(0) + eps) + bias
    return out[mask]


def test_layer_norm_graph_mode_matches_dense_reference():
    ln = LayerNorm(F, rngs=nnx.Rngs(0))
    randomise_affine(ln, 1)
    s, b = P(ln.scale), P(ln.bias)
    want = ref_layer_norm_graph(X, BATCH, MASK, s, b)
    eager = np.asarray(ln(X, BATCH, mask=MASK))                  # num_graphs inferred
    check(eager[MASK], want)
    out = np.asarray(nnx.jit(lambda m, x, bt, mk: m(x, bt, B, mask=mk))(ln, X, BATCH, MASK))
    check(out[MASK], want)
    assert np.all(np.isfinite(out))  # padding rows: finite, not meaningful
    # batch=None is one graph, and equals an all-zero batch vector.
    real = MASK & (BATCH == 3)
    one = ref_layer_norm_graph(X[real], np.zeros(5, int), np.ones(5, bool), s, b)
    check(fast(lambda m, x: m(x))(ln, X[real]), one)
    check(fast(lambda m, x, bt: m(x, bt, 1))(ln, X[real], np.zeros(5, np.int32)), one)
    # Without the mask, padding rows do enter the statistics (and change them).
    unmasked = np.asarray(fast(lambda m, x, bt: m(x, bt, B + 1))(ln, X, BATCH))
    assert not np.allclose(unmasked[MASK], want, atol=1e-3)


def test_layer_norm_node_mode_matches_dense_reference():
    ln = LayerNorm(F, mode="node", rngs=nnx.Rngs(0))
    randomise_affine(ln, 2)
    check(fast(lambda m, x, bt: m(x, bt))(ln, X, BATCH),
          ref_layer_norm_node(X, P(ln.scale), P(ln.bias)))
    plain = LayerNorm(F, mode="node", affine=False)
    assert plain.scale is None
    check(fast(lambda m, x: m(x))(plain, X), ref_layer_norm_node(X, 1.0, 0.0))
    with pytest.raises(ValueError, match="mode must be"):
        LayerNorm(F, mode="batch")
    with pytest.raises(ValueError, match=r"expects x of shape \[N, 4\]"):
        plain(X[:, :3])


def test_graph_norm_matches_dense_reference():
    gn = GraphNorm(F, rngs=nnx.Rngs(0))
    randomise_affine(gn, 3)
    w, b, a = P(gn.weight), P(gn.bias), P(gn.mean_scale)
    want = ref_graph_norm(X, BATCH, MASK, w, b, a)
    check(np.asarray(gn(X, BATCH, mask=MASK))[MASK], want)
    out = nnx.jit(lambda m, x, bt, mk: m(x, bt, B, mask=mk))(gn, X, BATCH, MASK)
    check(np.asarray(out)[MASK], want)
    real = MASK & (BATCH == 1)
    check(fast(lambda m, x: m(x))(gn, X[real]),
          ref_graph_norm(X[real], np.zeros(3, int), np.ones(3, bool), w, b, a))


@pytest.mark.parametrize("make", [lambda: LayerNorm(F), lambda: GraphNorm(F)],
                         ids=["LayerNorm", "GraphNorm"])
def test_norms_need_static_num_graphs_under_jit(make):
    layer = make()
    with pytest.raises(ValueError, match="num_graphs=<number of graphs>"):
        nnx.jit(lambda m, x, b: m(x, b))(layer, X, BATCH)
    with pytest.raises(ValueError, match="num_graphs must be a static Python int"):
        nnx.jit(lambda m, x, b, k: m(x, b, k))(layer, X, BATCH, 4)
    # batch=None (one graph) needs nothing static.
    nnx.jit(lambda m, x: m(x))(layer, X)


# --------------------------------------------------------------- global pools
POOLS = {"add": (global_add_pool, np.sum), "mean": (global_mean_pool, np.mean),
         "max": (global_max_pool, np.max), "min": (global_min_pool, np.min)}


def ref_pool(fn, x, batch, size, mask):
    out = np.zeros((size,) + x.shape[1:])
    for g in range(size):
        rows = (batch == g) & mask
        if rows.any():
            out[g] = fn(np.asarray(x, np.float64)[rows], axis=0)
    return out


@pytest.mark.parametrize("name", sorted(POOLS))
def test_global_pools_match_dense_reference(name):
    pool, fn = POOLS[name]
    want = ref_pool(fn, X, BATCH, B, MASK)
    assert np.all(want[2] == 0)  # the empty graph
    check(pool(X, BATCH, mask=MASK), want)                      # size inferred: 4
    check(pool(X, BATCH, B + 2, mask=MASK), ref_pool(fn, X, BATCH, B + 2, MASK))
    check(jax.jit(lambda x, b, m: pool(x, b, B, mask=m))(X, BATCH, MASK), want)
    # No mask: the padding node with id 0 counts, the one with id 4 needs size 5.
    check(pool(X, BATCH), ref_pool(fn, X, BATCH, B + 1, np.ones(N, bool)))
    check(pool(X, BATCH, B), ref_pool(fn, X, BATCH, B, np.ones(N, bool)))
    # batch=None: one graph, [1, F]; a mask still applies.
    check(pool(X), fn(np.asarray(X, np.float64), axis=0, keepdims=True))
    check(pool(X, mask=MASK), fn(np.asarray(X, np.float64)[MASK], axis=0, keepdims=True))
    check(pool(X, mask=np.zeros(N, bool)), np.zeros((1, F)))


def test_global_pool_needs_size_under_jit():
    with pytest.raises(ValueError, match="pass size=<number of graphs>"):
        jax.jit(lambda x, b: global_mean_pool(x, b))(X, BATCH)
    with pytest.raises(ValueError, match="size must be 1"):
        global_add_pool(X, None, 3)
    with pytest.raises(ValueError, match="size must be a static Python int"):
        jax.jit(lambda x, b, s: global_max_pool(x, b, s))(X, BATCH, 4)


# --------------------------------------------------------------- top-k pooling
def ref_select(score, batch, valid, num_graphs, ratio):
    perm = []
    for g in range(num_graphs):
        nodes = np.flatnonzero((batch == g) & valid)
        k = min(ratio, len(nodes)) if isinstance(ratio, int) else math.ceil(ratio * len(nodes))
        perm += list(nodes[np.argsort(-score[nodes], kind="stable")][:k])
    return np.asarray(perm, int)


def ref_filter_edges(ei, perm, valid):
    new = {int(p): i for i, p in enumerate(perm)}
    return np.asarray([[new[s], new[d]] for s, d in ei.T
                       if s in new and d in new and valid[s] and valid[d]],
                      int).reshape(-1, 2).T


def ref_topk_score(layer, x):
    w = P(layer.weight)[0]
    return np.tanh(np.asarray(x, np.float64) @ w / np.linalg.norm(w))


def ref_gcn_score(layer, x, ei, valid):
    """tanh(GCN(x)) over the edges between valid nodes (dense, A + I)."""
    n = x.shape[0]
    A = np.zeros((n, n))
    for s, d in ei.T:
        if valid[s] and valid[d]:
            A[d, s] += 1.0
    A[np.arange(n), np.arange(n)] = 1.0  # every node: exactly one unit self-loop
    deg = A.sum(1)
    A = A / np.sqrt(deg)[:, None] / np.sqrt(deg)[None, :]
    out = A @ np.asarray(x, np.float64) @ P(layer.gnn.lin.kernel) + P(layer.gnn.bias)
    return np.tanh(out[:, 0])


def check_pool_output(out, x, ei, batch, valid, score, ratio, num_graphs, multiplier=1.0):
    """Every field of a PoolOutput against the reference selection."""
    perm = ref_select(score, batch, valid, num_graphs, ratio)
    k_real = len(perm)
    size = out.x.shape[0]
    m = np.asarray(out.node_mask)
    assert m.tolist() == [True] * k_real + [False] * (size - k_real)
    np.testing.assert_array_equal(np.asarray(out.perm)[:k_real], perm)
    check(np.asarray(out.score)[:k_real], score[perm])
    check(np.asarray(out.x)[:k_real],
          np.asarray(x, np.float64)[perm] * score[perm][:, None] * multiplier)
    np.testing.assert_array_equal(np.asarray(out.batch)[:k_real], batch[perm])
    # Empty slots: zero features and score, out-of-range graph id.
    assert np.all(np.asarray(out.x)[k_real:] == 0) and np.all(np.asarray(out.score)[k_real:] == 0)
    assert np.all(np.asarray(out.batch)[k_real:] == num_graphs)
    em = np.asarray(out.edge_mask)
    eo = np.asarray(out.edge_index)
    np.testing.assert_array_equal(eo[:, em], ref_filter_edges(ei, perm, valid))
    assert np.all(eo[:, ~em] == size)
    return perm


def test_topk_selects_top_scores_per_graph_with_static_shapes():
    pool = TopKPooling(F, 0.5, rngs=nnx.Rngs(0))
    score = ref_topk_score(pool, X)
    size = pool.output_size(N, B)
    assert size == min(N, math.ceil(0.5 * N) + B - 1) == 10
    eager = pool(X, EI, BATCH, mask=MASK)
    assert eager.x.shape == (size, F) and eager.edge_index.shape == EI.shape
    perm = check_pool_output(eager, X, EI, BATCH, MASK, score, 0.5, B)
    assert len(perm) == 2 + 2 + 0 + 3 and not set(perm) & {12, 13}

    traces = []

    def step(m, x, e, b, mk):
        traces.append(1)
        return m(x, e, b, B, mask=mk)

    jitted = nnx.jit(step)
    out = jitted(pool, X, EI, BATCH, MASK)
    for a, b in zip(out, eager):
        assert a.shape == b.shape and a.dtype == b.dtype
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=1e-6)
    # Other values, same shapes: same compiled program, still correct.
    x2 = np.random.default_rng(5).normal(size=X.shape).astype(np.float32)
    out2 = jitted(pool, x2, EI, BATCH, MASK)
    assert len(traces) == 1 and out2.x.shape == (size, F)
    check_pool_output(out2, x2, EI, BATCH, MASK, ref_topk_score(pool, x2), 0.5, B)


def test_topk_int_ratio_min_score_multiplier_and_single_graph():
    pool = TopKPooling(F, 2, multiplier=2.0, nonlinearity="sigmoid", rngs=nnx.Rngs(1))
    w = P(pool.weight)[0]
    score = 1 / (1 + np.exp(-(np.asarray(X, np.float64) @ w) / np.linalg.norm(w)))
    out = fast(lambda m, x, e, b, mk: m(x, e, b, B, mask=mk))(pool, X, EI, BATCH, MASK)
    assert out.x.shape == (min(N, 2 * B), F)
    check_pool_output(out, X, EI, BATCH, MASK, score, 2, B, multiplier=2.0)

    # One graph (batch=None): K = ceil(ratio * N); padding via the mask.
    single = TopKPooling(F, 0.3, rngs=nnx.Rngs(2))
    out = fast(lambda m, x, e, mk: m(x, e, mask=mk))(single, X, EI, MASK)
    assert out.x.shape == (math.ceil(0.3 * N), F)
    check_pool_output(out, X, EI, np.zeros(N, int), MASK, ref_topk_score(single, X), 0.3, 1)

    # min_score: per-graph softmax of the raw projection, kept in node order; K = N.
    ms = TopKPooling(F, min_score=0.3, rngs=nnx.Rngs(3))
    raw = np.asarray(X, np.float64) @ P(ms.weight)[0]
    soft = np.zeros(N)
    for g in range(B):
        rows = (BATCH == g) & MASK
        if rows.any():
            e = np.exp(raw[rows] - raw[rows].max())
            soft[rows] = e / e.sum()
    keep = np.zeros(N, bool)
    for g in range(B):
        rows = (BATCH == g) & MASK
        if rows.any():
            keep[rows] = soft[rows] > min(soft[rows].max() - 1e-7, 0.3)
    out = fast(lambda m, x, e, b, mk: m(x, e, b, B, mask=mk))(ms, X, EI, BATCH, MASK)
    assert out.x.shape == (N, F)
    m = np.asarray(out.node_mask)
    np.testing.assert_array_equal(np.asarray(out.perm)[m], np.flatnonzero(keep))
    check(np.asarray(out.x)[m], np.asarray(X, np.float64)[keep] * soft[keep][:, None])

    for bad in (0, 1.5, -0.1, True):
        with pytest.raises(ValueError, match="ratio"):
            TopKPooling(F, bad, rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match="num_graphs=<number of graphs>"):
        nnx.jit(lambda m, x, e, b: m(x, e, b))(pool, X, EI, BATCH)


def test_sag_pooling_scores_with_gcn_on_real_edges_only():
    pool = SAGPooling(F, 0.5, rngs=nnx.Rngs(4))
    pool.gnn.bias[...] = jnp.asarray([0.1])
    score = ref_gcn_score(pool, X, EI, MASK)
    out = nnx.jit(lambda m, x, e, b, mk: m(x, e, b, B, mask=mk))(pool, X, EI, BATCH, MASK)
    check_pool_output(out, X, EI, BATCH, MASK, score, 0.5, B)
    eager = pool(X, EI, BATCH, mask=MASK)
    for a, b in zip(out, eager):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=1e-6)
    with pytest.raises(ValueError, match="only 'gcn'"):
        SAGPooling(F, gnn="gat", rngs=nnx.Rngs(0))


@pytest.mark.parametrize("cls", [TopKPooling, SAGPooling])
def test_pooling_gradients_reach_the_score_weights(cls):
    pool = cls(F, 0.5, rngs=nnx.Rngs(6))

    def loss(m, x, e, b, mk):
        out = m(x, e, b, B, mask=mk)
        return jnp.sum(global_add_pool(out.x, out.batch, B, mask=out.node_mask) ** 2)

    grads = fast(nnx.grad(loss))(pool, X, EI, BATCH, MASK)
    leaves = [np.asarray(v) for v in jax.tree.leaves(grads)]
    assert leaves and all(np.all(np.isfinite(g)) for g in leaves)
    assert all(np.any(g != 0) for g in leaves)  # weight (TopK) / kernel and bias (SAG)


def test_pooling_composes_with_global_pool_and_a_second_pooling_under_jit():
    first = TopKPooling(F, 0.5, rngs=nnx.Rngs(7))
    second = SAGPooling(F, 0.5, rngs=nnx.Rngs(8))

    @nnx.jit
    def model(p1, p2, x, e, b, mk):
        o1 = p1(x, e, b, B, mask=mk)
        o2 = p2(o1.x, o1.edge_index, o1.batch, B, mask=o1.node_mask, edge_mask=o1.edge_mask)
        return (o1, o2, global_mean_pool(o2.x, o2.batch, B, mask=o2.node_mask),
                global_max_pool(o2.x, o2.batch, B))  # empty slots carry id B: dropped

    o1, o2, mean, mx = model(first, second, X, EI, BATCH, MASK)
    # The same two steps on the compacted (PyG-style) first output, by reference.
    perm1 = check_pool_output(o1, X, EI, BATCH, MASK, ref_topk_score(first, X), 0.5, B)
    k1 = len(perm1)
    x1, b1 = np.asarray(o1.x)[:k1], BATCH[perm1]
    e1 = ref_filter_edges(EI, perm1, MASK)
    s2 = ref_gcn_score(second, x1, e1, np.ones(k1, bool))
    perm2 = ref_select(s2, b1, np.ones(k1, bool), B, 0.5)
    x2 = np.asarray(x1, np.float64)[perm2] * s2[perm2][:, None]
    check(np.asarray(o2.x)[np.asarray(o2.node_mask)], x2)
    check(mean, ref_pool(np.mean, x2, b1[perm2], B, np.ones(len(perm2), bool)))
    check(mx, ref_pool(np.max, x2, b1[perm2], B, np.ones(len(perm2), bool)))


# --------------------------------------------------------------- JraphX 0.1.0
# Differential checks on the unpadded batch (JraphX has no node mask for these),
# parameters copied from gnncore. Divergences found while writing them, not
# compared for that reason:
# - LayerNorm: JraphX's default mode is "node", PyG's and gnncore's "graph";
#   JraphX accepts ``mask`` but ignores it (gnncore excludes masked nodes).
# - Global pools / norms: JraphX has no ``mask``; without ``size`` both infer
#   ``max(batch) + 1`` eagerly and raise under jit.
# - TopK / SAG: JraphX returns data-dependent sizes (eager only) and takes
#   ``edge_attr`` as third positional argument; it treats an int ``ratio`` as a
#   count by type (as here), where PyG's code uses ``ratio >= 1``.
REAL = MASK
XR, BR = X[REAL], BATCH[REAL]
EIR = EI[:, np.all(np.isin(EI, np.flatnonzero(REAL)), axis=0)]


def _copy(dst, src):
    dst[...] = jnp.asarray(np.asarray(src[...]).reshape(dst[...].shape))


def test_jraphx_norms_agree():
    jnorm = pytest.importorskip("jraphx.nn.norm")
    for mode in ("graph", "node"):
        ours = LayerNorm(F, mode=mode)
        randomise_affine(ours, 10)
        theirs = jnorm.LayerNorm(F, mode=mode, rngs=nnx.Rngs(0))
        _copy(theirs.weight, ours.scale)
        _copy(theirs.bias, ours.bias)
        check(fast(lambda m, x, b: m(x, b, B))(ours, XR, BR),
              np.asarray(fast(lambda m, x, b: m(x, b, B))(theirs, XR, BR), np.float64))
    ours = GraphNorm(F)
    randomise_affine(ours, 11)
    theirs = jnorm.GraphNorm(F)
    for name in ("weight", "bias", "mean_scale"):
        _copy(getattr(theirs, name), getattr(ours, name))
    check(fast(lambda m, x, b: m(x, b, B))(ours, XR, BR),
          np.asarray(fast(lambda m, x, b: m(x, b, B))(theirs, XR, BR), np.float64))


def test_jraphx_global_pools_agree():
    jpool = pytest.importorskip("jraphx.nn.pool")
    for name in sorted(POOLS):
        ours, theirs = POOLS[name][0], getattr(jpool, f"global_{name}_pool")
        got = jax.jit(lambda x, b, f=ours: f(x, b, B + 1), compiler_options=_FAST)(XR, BR)
        want = jax.jit(lambda x, b, f=theirs: f(x, b, B + 1), compiler_options=_FAST)(XR, BR)
        check(got, np.asarray(want, np.float64))  # graphs 2 and 4 are empty: 0 in both
        check(ours(XR), np.asarray(theirs(XR), np.float64))


@pytest.mark.parametrize("kind", ["topk", "sag"])
def test_jraphx_topk_and_sag_pooling_agree(kind):
    jpool = pytest.importorskip("jraphx.nn.pool")
    if kind == "topk":
        ours = TopKPooling(F, 0.6, rngs=nnx.Rngs(12))
        theirs = jpool.TopKPooling(F, 0.6, rngs=nnx.Rngs(0))
        _copy(theirs.weight, ours.weight)
    else:
        ours = SAGPooling(F, 0.6, rngs=nnx.Rngs(13))
        ours.gnn.bias[...] = jnp.asarray([0.2])
        theirs = jpool.SAGPooling(F, 0.6, rngs=nnx.Rngs(0))
        _copy(theirs.gnn.linear.kernel, ours.gnn.lin.kernel)
        _copy(theirs.gnn.bias, ours.gnn.bias)
    out = fast(lambda m, x, e, b: m(x, e, b, B))(ours, XR, EIR, BR)
    jx, jei, _, jb, jperm = theirs(jnp.asarray(XR), jnp.asarray(EIR), None, jnp.asarray(BR))
    m, em = np.asarray(out.node_mask), np.asarray(out.edge_mask)
    np.testing.assert_array_equal(np.asarray(out.perm)[m], np.asarray(jperm))
    check(np.asarray(out.x)[m], np.asarray(jx, np.float64))
    np.testing.assert_array_equal(np.asarray(out.batch)[m], np.asarray(jb))
    np.testing.assert_array_equal(np.asarray(out.edge_index)[:, em], np.asarray(jei))


# --------------------------------------------------------------- coalesce
def test_coalesce_and_to_undirected_eagerly():
    ei = np.array([[2, 0, 2, 1, 0, 2], [1, 1, 1, 1, 1, 2]])
    w = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], np.float32)
    out, ow = coalesce(ei, w)
    np.testing.assert_array_equal(np.asarray(out), [[0, 1, 2, 2], [1, 1, 1, 2]])
    np.testing.assert_allclose(np.asarray(ow), [7.0, 4.0, 4.0, 6.0])
    for reduce, want in (("mean", [3.5, 4, 2, 6]), ("max", [5, 4, 3, 6]),
                         ("min", [2, 4, 1, 6])):
        np.testing.assert_allclose(np.asarray(coalesce(ei, w, reduce=reduce)[1]), want)
    attr = np.stack([w, -w], 1)
    np.testing.assert_allclose(np.asarray(coalesce(ei, attr)[1]),
                               [[7, -7], [4, -4], [4, -4], [6, -6]])
    assert coalesce(jnp.asarray(ei))[1] is None
    assert coalesce(np.zeros((2, 0), int))[0].shape == (2, 0)
    with pytest.raises(ValueError, match=r"outside \[0, 2\)"):
        coalesce(ei, num_nodes=2)

    und, uw = to_undirected(np.array([[0, 1, 2], [1, 0, 2]]), np.array([1.0, 2.0, 3.0]))
    np.testing.assert_array_equal(np.asarray(und), [[0, 1, 2], [1, 0, 2]])
    np.testing.assert_allclose(np.asarray(uw), [3.0, 3.0, 6.0])  # a loop meets itself
    und, _ = to_undirected(np.array([[0, 3], [1, 1]]))
    np.testing.assert_array_equal(np.asarray(und), [[0, 1, 1, 3], [1, 0, 3, 1]])

    for fn in (coalesce, to_undirected):
        with pytest.raises(ValueError, match="eager-only.*before jit"):
            jax.jit(lambda e, fn=fn: fn(e)[0])(jnp.asarray(ei))
        with pytest.raises(ValueError, match="eager-only"):
            jax.jit(lambda v, fn=fn: fn(ei, v)[1])(jnp.asarray(w))

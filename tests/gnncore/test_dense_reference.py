"""Every gnncore layer against an independent dense-matrix reference.

The references below are written from the maths (PyG semantics) with numpy in
float64 and never call gnncore helpers; they only read the layer's own
parameters (e.g. ``layer.lin.kernel[...]``).

Conventions: ``edge_index`` row 0 is the source ``j``, row 1 the target ``i``;
``A[i, j]`` is the summed weight of all edges ``j -> i`` (duplicates add up).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from graphs import edge_weight, features, random_graph, randomise, union

from gnncore import GNN, BatchNorm, ConvSpec, GATConv, GCNConv, GINConv, SAGEConv

ATOL = 1e-5


# --------------------------------------------------------------------------- graphs
def _graphs():
    """name -> (num_nodes, edge_index), covering the awkward cases.

    Whole-graph edge cases (one node, no edges at all) are separate inputs; the
    general cases are components of one disjoint union, so that each layer
    configuration compiles once for them (layers never mix components)."""
    components = [
        (9, random_graph(0, 8, 16)),                     # node 8 is isolated
        (6, random_graph(1, 6, 25, loops=4, dups=5)),    # dense, many loops / dups
        # isolated nodes 3 and 5, duplicate edges, a duplicated loop, a plain loop
        (6, np.array([[0, 1, 1, 2, 0, 4, 4, 4, 2, 1],
                      [1, 0, 0, 0, 2, 4, 4, 1, 2, 2]])),
        (5, np.array([[1, 2, 3, 4], [0, 0, 0, 0]])),     # star: 1..4 have no in-edges
        (1, np.zeros((2, 0), np.int64)),                 # isolated node
        (1, np.array([[0], [0]])),                       # node with only a loop
        (2, np.array([[0, 0], [1, 1]])),                 # duplicate edge only
    ]
    return {
        "union": union(components, 0),
        "single_node": (1, np.zeros((2, 0), np.int64)),
        "single_node_loop": (1, np.array([[0], [0]])),
        "single_node_two_loops": (1, np.array([[0, 0], [0, 0]])),
        "no_edges": (5, np.zeros((2, 0), np.int64)),
    }


GRAPHS = _graphs()
GRAPH_IDS = sorted(GRAPHS)


# ------------------------------------------------------------------------ helpers
def _run(graphdef, state, args, arrays, static):
    module = nnx.merge(graphdef, state)
    out = module(*args, **arrays, **dict(static))
    return out, nnx.state(module)


# Small programs: XLA's backend optimisations cost more compile time than they save.
_run_jit = jax.jit(_run, static_argnums=(0, 4),
                   compiler_options={"xla_backend_optimization_level": 0})


def apply(module, *args, **kwargs):
    """``module(*args, **kwargs)`` compiled with ``jax.jit``: one compile per layer
    and graph shape (eager mode compiles every primitive per shape, which is far
    slower here). Python scalars / None / bools are static keywords; array
    keywords are traced. State updates (BatchNorm statistics) are written back."""
    static = tuple(sorted((k, v) for k, v in kwargs.items()
                          if v is None or isinstance(v, (bool, int, float, str))))
    arrays = {k: v for k, v in kwargs.items() if k not in dict(static)}
    graphdef, state = nnx.split(module)
    out, new_state = _run_jit(graphdef, state, args, arrays, static)
    nnx.update(module, new_state)
    return out


def P(v):
    """A parameter (nnx variable or array) as a float64 numpy array."""
    if isinstance(v, nnx.Variable):
        v = v[...]
    return np.asarray(v, dtype=np.float64)


def adjacency(edge_index, num_src, num_dst, weight=None):
    """Dense ``A[i, j]`` = summed weight of edges ``j -> i``."""
    ei = np.asarray(edge_index)
    A = np.zeros((num_dst, num_src))
    w = np.ones(ei.shape[1]) if weight is None else np.asarray(weight, np.float64)
    np.add.at(A, (ei[1], ei[0]), w)
    return A


def leaky_relu(x, slope):
    return np.where(x >= 0, x, slope * x)


def check(actual, expected, atol=ATOL):
    actual = np.asarray(actual, dtype=np.float64)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    assert np.all(np.isfinite(actual))
    err = float(np.max(np.abs(actual - expected), initial=0.0))
    assert err <= atol, f"max abs error {err:.3g} > {atol}"


def _x64(a):
    return None if a is None else np.asarray(a, np.float64)


# ------------------------------------------------------------------- references
def ref_gcn(layer, x, edge_index, edge_weight=None):
    x = _x64(x)
    n = x.shape[0]
    ei = np.asarray(edge_index)
    w = np.ones(ei.shape[1]) if edge_weight is None else _x64(edge_weight)
    A = adjacency(ei, n, n, w)
    if layer.normalize:
        if layer.add_self_loops:
            diag = np.full(n, 2.0 if layer.improved else 1.0)
            loop = ei[0] == ei[1]
            diag[ei[0, loop]] = w[loop]          # an existing loop keeps its weight
            A[np.arange(n), np.arange(n)] = diag
        deg = A.sum(axis=1)
        dis = np.where(deg > 0, 1.0 / np.sqrt(np.where(deg > 0, deg, 1.0)), 0.0)
        A = dis[:, None] * A * dis[None, :]
    out = A @ x @ P(layer.lin.kernel)
    if layer.bias is not None:
        out = out + P(layer.bias)
    return out


def _gat_project(layer, x):
    H, C = layer.heads, layer.out_features
    if isinstance(x, tuple):
        xs, xd = _x64(x[0]), _x64(x[1])
        ks = P(layer.lin.kernel if layer.lin is not None else layer.lin_src.kernel)
        kd = P(layer.lin.kernel if layer.lin is not None else layer.lin_dst.kernel)
    else:
        xs = xd = _x64(x)
        ks = kd = P(layer.lin.kernel)
    return (xs @ ks).reshape(-1, H, C), (xd @ kd).reshape(-1, H, C)


def _gat_combine(layer, out):
    """out [N, H, C] -> concat / mean + bias."""
    n = out.shape[0]
    out = out.reshape(n, -1) if layer.concat else out.mean(axis=1)
    if layer.bias is not None:
        out = out + P(layer.bias)
    return out


def ref_gat(layer, x, edge_index):
    """Dense GAT without edge features. Returns (out, alpha_of(i, j) -> [H])."""
    hs, hd = _gat_project(layer, x)
    ns, nd = hs.shape[0], hd.shape[0]
    ei = np.asarray(edge_index)
    if layer.add_self_loops:
        keep = ei[0] != ei[1]
        M = adjacency(ei[:, keep], ns, nd) + np.eye(nd)   # multiplicity of j -> i
    else:
        M = adjacency(ei, ns, nd)
    a_s = np.einsum("nhc,hc->nh", hs, P(layer.att_src)[0])
    a_d = np.einsum("nhc,hc->nh", hd, P(layer.att_dst)[0])
    e = leaky_relu(a_d[:, None, :] + a_s[None, :, :], layer.negative_slope)  # [i, j, H]
    mask = (M > 0)[:, :, None]
    e_max = np.max(np.where(mask, e, -np.inf), axis=1, keepdims=True)
    e_max = np.where(np.isfinite(e_max), e_max, 0.0)
    p = np.where(mask, np.exp(e - e_max), 0.0)
    Z = np.sum(M[:, :, None] * p, axis=1, keepdims=True)   # each edge copy counts
    alpha = np.where(Z > 0, p / np.where(Z > 0, Z, 1.0), 0.0)  # weight of ONE edge j->i
    out = np.einsum("ijh,ij,jhc->ihc", alpha, M, hs)
    return _gat_combine(layer, out), alpha


def ref_gat_edge(layer, x, edge_index, edge_attr):
    """GAT with edge features via dense incidence matrices (duplicates may carry
    different features, so a plain [i, j] matrix cannot hold them).
    Returns (out, alpha [E + N, H]) in the layer's documented edge layout:
    the original edges (self-loops weighted 0) then one loop per node."""
    hs, hd = _gat_project(layer, x)
    H, C = layer.heads, layer.out_features
    n = hd.shape[0]
    ei = np.asarray(edge_index)
    ea = _x64(edge_attr).reshape(ei.shape[1], layer.edge_dim)
    E = ei.shape[1]
    valid = ei[0] != ei[1]
    # incoming (non-loop) mean of edge features for the new loops
    S_in = np.zeros((n, E))
    S_in[ei[1, valid], np.flatnonzero(valid)] = 1.0
    cnt = S_in.sum(axis=1, keepdims=True)
    if layer.fill_value == "mean":
        loop_attr = np.where(cnt > 0, S_in @ ea / np.maximum(cnt, 1.0), 0.0)
    elif layer.fill_value in ("add", "sum"):
        loop_attr = S_in @ ea
    elif layer.fill_value in ("max", "min"):
        pick = np.max if layer.fill_value == "max" else np.min
        loop_attr = np.array([pick(ea[S_in[i] > 0], axis=0) if cnt[i, 0] else
                              np.zeros(ea.shape[1]) for i in range(n)]).reshape(n, -1)
    else:
        loop_attr = np.full((n, ea.shape[1]), float(layer.fill_value))
    src = np.concatenate([ei[0], np.arange(n)])
    dst = np.concatenate([ei[1], np.arange(n)])
    used = np.concatenate([valid, np.ones(n, bool)])
    attr = np.concatenate([ea, loop_attr])
    he = (attr @ P(layer.lin_edge.kernel)).reshape(-1, H, C)
    a_s = np.einsum("nhc,hc->nh", hs, P(layer.att_src)[0])
    a_d = np.einsum("nhc,hc->nh", hd, P(layer.att_dst)[0])
    a_e = np.einsum("ehc,hc->eh", he, P(layer.att_edge)[0])
    logits = leaky_relu(a_s[src] + a_d[dst] + a_e, layer.negative_slope)  # [E', H]
    S = np.zeros((n, len(src)))                                          # target incidence
    S[dst[used], np.flatnonzero(used)] = 1.0
    shift = np.array([logits[S[i] > 0].max(axis=0) for i in range(n)])  # every node has a loop
    p = np.exp(logits - shift[dst]) * used[:, None]
    Z = S @ p
    alpha = p / Z[dst]
    out = np.einsum("ie,eh,ehc->ihc", S, alpha, hs[src])
    return _gat_combine(layer, out), alpha


def ref_sage(layer, x, edge_index):
    if isinstance(x, tuple):
        xs, xd = _x64(x[0]), _x64(x[1])
    else:
        xs = xd = _x64(x)
    if layer.lin is not None:  # project
        xs = np.maximum(xs @ P(layer.lin.kernel) + P(layer.lin.bias), 0.0)
    A = adjacency(edge_index, xs.shape[0], xd.shape[0])
    deg = A.sum(axis=1, keepdims=True)
    if layer.aggr in ("sum", "add"):
        agg = A @ xs
    elif layer.aggr == "mean":
        agg = (A @ xs) / np.maximum(deg, 1.0)
    else:
        red = np.max if layer.aggr == "max" else np.min
        fill = -np.inf if layer.aggr == "max" else np.inf
        stacked = np.where((A > 0)[:, :, None], xs[None, :, :], fill)
        agg = np.where(deg > 0, red(stacked, axis=1), 0.0)
    out = agg @ P(layer.lin_l.kernel)
    if layer.lin_l.bias is not None:
        out = out + P(layer.lin_l.bias)
    if layer.lin_r is not None:
        out = out + xd @ P(layer.lin_r.kernel)
    if layer.normalize:
        norm = np.sqrt(np.sum(out * out, axis=-1, keepdims=True))
        out = out / np.maximum(norm, 1e-12)
    return out


def ref_mlp(mlp, z):
    layers = list(mlp.layers)
    for k, lin in enumerate(layers):
        z = z @ P(lin.kernel)
        if lin.bias is not None:
            z = z + P(lin.bias)
        if k < len(layers) - 1:
            z = np.maximum(z, 0.0)
    return z


def ref_gin(layer, x, edge_index):
    if isinstance(x, tuple):
        xs, xd = _x64(x[0]), _x64(x[1])
    else:
        xs = xd = _x64(x)
    A = adjacency(edge_index, xs.shape[0], xd.shape[0])
    eps = float(P(layer.eps)) if layer.train_eps else float(layer.eps)
    return ref_mlp(layer.nn, A @ xs + (1.0 + eps) * xd)


def ref_batchnorm_eval(bn, x):
    x = _x64(x)
    out = (x - P(bn.mean)) / np.sqrt(P(bn.var) + bn.eps)
    if bn.scale is not None:
        out = out * P(bn.scale) + P(bn.bias)
    return out


def ref_batchnorm_train(bn, x, mask=None):
    """Returns (out, new_running_mean, new_running_var); reads the old stats."""
    x = _x64(x)
    w = np.ones(x.shape[0]) if mask is None else np.asarray(mask, np.float64)
    n = w.sum()
    mean = (w[:, None] * x).sum(0) / n
    var = (w[:, None] * (x - mean) ** 2).sum(0) / n
    out = (x - mean) / np.sqrt(var + bn.eps)
    if bn.scale is not None:
        out = out * P(bn.scale) + P(bn.bias)
    unbiased = var * n / max(n - 1, 1)
    m = bn.momentum
    return out, (1 - m) * P(bn.mean) + m * mean, (1 - m) * P(bn.var) + m * unbiased


# ============================================================================ GCN
GCN_CONFIGS = {
    "default": {},
    "improved": {"improved": True},
    "no_loops": {"add_self_loops": False},
    "no_norm": {"normalize": False},
    "no_bias": {"bias": False},
}


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("cfg", sorted(GCN_CONFIGS))
def test_gcn_matches_dense(cfg, weighted):
    layer = randomise(GCNConv(5, 4, **GCN_CONFIGS[cfg], rngs=nnx.Rngs(0)), 1)
    for k, name in enumerate(GRAPH_IDS):
        n, ei = GRAPHS[name]
        x = features(10 + k, n, 5)
        w = edge_weight(20 + k, ei) if weighted else None
        out = apply(layer, jnp.asarray(x), jnp.asarray(ei, jnp.int32),
                    None if w is None else jnp.asarray(w))
        check(out, ref_gcn(layer, x, ei, w))


def test_gcn_duplicate_loop_counts_once():
    """PyG's add_remaining_self_loops: two loops on a node become one loop of
    weight 1 (not 2); an explicit dense check of that convention."""
    layer = GCNConv(1, 1, bias=False, rngs=nnx.Rngs(0))
    layer.lin.kernel[...] = jnp.ones((1, 1))
    ei = jnp.array([[0, 0, 1], [0, 0, 0]], jnp.int32)  # loops 0->0 twice, edge 1->0
    out = layer(jnp.array([[1.0], [3.0]]), ei)
    # A_hat = [[1, 1], [0, 1]]; deg = [2, 1]
    expected = np.array([[1 / 2 + 3 / np.sqrt(2)], [3.0]])
    check(out, expected)


def test_gcn_improved_without_edge_weights_uses_a_plus_2i():
    """improved=True means A + 2I also without edge weights (the documented
    maths). PyG 2.8.1's gcn_norm drops the fill value 2 when no edge weights
    are given (its loops get weight 1, i.e. A + I); gnncore does not."""
    layer = GCNConv(1, 1, improved=True, bias=False, rngs=nnx.Rngs(0))
    layer.lin.kernel[...] = jnp.ones((1, 1))
    ei = np.array([[1, 2, 0], [0, 0, 1]])  # 1->0, 2->0, 0->1; node 2 has no in-edge
    x = np.array([[1.0], [3.0], [5.0]], np.float32)
    out = layer(jnp.asarray(x), jnp.asarray(ei, jnp.int32))
    a_hat = adjacency(ei, 3, 3) + 2.0 * np.eye(3)
    d = a_hat.sum(axis=1)  # [4, 3, 2]
    expected = a_hat / np.sqrt(np.outer(d, d)) @ _x64(x)
    check(out, expected)
    # node 2 keeps only its own loop: 2 / deg = 1, so its output is x_2 itself
    np.testing.assert_allclose(np.asarray(out)[2], x[2], rtol=1e-6)
    a_pyg = adjacency(ei, 3, 3) + np.eye(3)  # what PyG 2.8.1 computes here
    d_pyg = a_pyg.sum(axis=1)
    assert not np.allclose(np.asarray(out), a_pyg / np.sqrt(np.outer(d_pyg, d_pyg)) @ _x64(x),
                           atol=1e-3)
    check(out, ref_gcn(layer, x, ei))


def test_gcn_cached_matches_dense():
    n, ei = GRAPHS["union"]
    x = features(3, n, 5)
    w = edge_weight(4, ei)
    layer = randomise(GCNConv(5, 3, cached=True, rngs=nnx.Rngs(2)), 5)
    layer.precompute_norm(jnp.asarray(ei, jnp.int32), n, jnp.asarray(w))
    out = apply(layer, jnp.asarray(x), jnp.asarray(ei, jnp.int32))
    check(out, ref_gcn(layer, x, ei, w))


# ============================================================================ GAT
GAT_CONFIGS = {
    "h1": {"heads": 1},
    "h3_concat": {"heads": 3},
    "h2_mean": {"heads": 2, "concat": False},
    "h2_slope": {"heads": 2, "negative_slope": 0.05},
    "h2_no_loops": {"heads": 2, "add_self_loops": False},
    "no_bias": {"heads": 2, "bias": False},
}


@pytest.mark.parametrize("cfg", sorted(GAT_CONFIGS))
def test_gat_matches_dense(cfg):
    layer = randomise(GATConv(5, 3, **GAT_CONFIGS[cfg], rngs=nnx.Rngs(1)), 2)
    for k, name in enumerate(GRAPH_IDS):
        n, ei = GRAPHS[name]
        x = features(30 + k, n, 5)
        eij = jnp.asarray(ei, jnp.int32)
        out, (ei_used, alpha) = apply(layer, jnp.asarray(x), eij,
                                      return_attention_weights=True)
        ref_out, ref_alpha = ref_gat(layer, x, ei)
        check(out, ref_out)
        if name == "union":
            check(apply(layer, jnp.asarray(x), eij), ref_out)
        # attention: every used edge j->i carries alpha_ref[i, j]; old loops carry 0
        ei_used, alpha = np.asarray(ei_used), np.asarray(alpha)
        E = ei.shape[1]
        expected = ref_alpha[ei_used[1], ei_used[0]]
        if layer.add_self_loops:
            assert ei_used.shape[1] == E + n
            np.testing.assert_array_equal(ei_used[:, E:], np.stack([np.arange(n)] * 2))
            old_loop = np.zeros(ei_used.shape[1], bool)
            old_loop[:E] = ei[0] == ei[1]
            expected[old_loop] = 0.0
        check(alpha, expected)
        # weights of the edges into each node sum to 1 (0 for no in-edges)
        sums = np.zeros((n, layer.heads))
        np.add.at(sums, ei_used[1], alpha)
        has_in = adjacency(ei_used, n, n).sum(1) > 0
        check(sums, np.repeat(has_in[:, None].astype(float), layer.heads, axis=1))


# Includes the graphs with no edges (reshape(0, -1) once broke edge_dim there).
EDGE_DIM_GRAPHS = GRAPH_IDS


@pytest.mark.parametrize("name", EDGE_DIM_GRAPHS)
@pytest.mark.parametrize("heads,concat", [(1, True), (2, True), (2, False)])
def test_gat_edge_features_match_dense(heads, concat, name):
    layer = randomise(GATConv(4, 3, heads=heads, concat=concat, edge_dim=2,
                              rngs=nnx.Rngs(3)), 4)
    n, ei = GRAPHS[name]
    k = GRAPH_IDS.index(name)
    x = features(40 + k, n, 4)
    ea = features(50 + k, ei.shape[1], 2)
    out, (ei_used, alpha) = apply(layer, jnp.asarray(x), jnp.asarray(ei, jnp.int32),
                                  jnp.asarray(ea), return_attention_weights=True)
    ref_out, ref_alpha = ref_gat_edge(layer, x, ei, ea)
    check(out, ref_out)
    np.testing.assert_array_equal(
        np.asarray(ei_used), np.concatenate([ei, np.stack([np.arange(n)] * 2)], 1))
    check(alpha, ref_alpha)


def test_gat_edge_features_no_edges_eager():
    """Regression: eager GATConv(edge_dim) on a graph with no edges."""
    layer = GATConv(4, 3, edge_dim=2, rngs=nnx.Rngs(0))
    out = layer(jnp.ones((3, 4)), jnp.zeros((2, 0), jnp.int32), jnp.zeros((0, 2)))
    assert out.shape == (3, 3) and bool(jnp.all(jnp.isfinite(out)))


@pytest.mark.parametrize("fill", [0.5, "add", "max", "min"])
def test_gat_edge_features_other_fills(fill):
    """A number, or a reduction of the node's other in-edges (the shared
    add_self_loops(fill_value=), as in PyG)."""
    layer = randomise(GATConv(4, 3, heads=2, edge_dim=2, fill_value=fill,
                              rngs=nnx.Rngs(3)), 4)
    n, ei = GRAPHS["union"]
    x, ea = features(1, n, 4), features(2, ei.shape[1], 2)
    out = apply(layer, jnp.asarray(x), jnp.asarray(ei, jnp.int32), jnp.asarray(ea))
    check(out, ref_gat_edge(layer, x, ei, ea)[0])


def _bipartite(seed, ns, nd, e):
    rng = np.random.default_rng(seed)
    ei = np.stack([rng.integers(0, ns, e), rng.integers(0, nd, e)])
    ei = np.concatenate([ei, ei[:, :2]], axis=1)  # duplicates
    return ei  # with few edges some targets have no neighbour


BIPARTITE = [(6, 4, 7), (3, 5, 4), (2, 3, 0), (1, 1, 1)]


@pytest.mark.parametrize("ns,nd,e", BIPARTITE)
def test_gat_bipartite_matches_dense(ns, nd, e):
    sep = randomise(GATConv((5, 3), 2, heads=2, add_self_loops=False,
                            rngs=nnx.Rngs(5)), 6)
    shared = randomise(GATConv(4, 2, heads=2, concat=False, add_self_loops=False,
                               rngs=nnx.Rngs(6)), 7)
    ei = _bipartite(ns * 10 + nd, ns, nd, e) if e else np.zeros((2, 0), np.int64)
    eij = jnp.asarray(ei, jnp.int32)
    xs, xd = features(1, ns, 5), features(2, nd, 3)
    out, (_, alpha) = apply(sep, (jnp.asarray(xs), jnp.asarray(xd)), eij,
                            return_attention_weights=True)
    ref_out, ref_alpha = ref_gat(sep, (xs, xd), ei)
    check(out, ref_out)
    check(alpha, ref_alpha[ei[1], ei[0]])
    xs, xd = features(3, ns, 4), features(4, nd, 4)
    check(apply(shared, (jnp.asarray(xs), jnp.asarray(xd)), eij),
          ref_gat(shared, (xs, xd), ei)[0])


# =========================================================================== SAGE
SAGE_CONFIGS = {
    "mean": {},
    "max": {"aggr": "max"},
    "sum": {"aggr": "sum"},
    "min": {"aggr": "min"},
    "mean_normalize": {"normalize": True},
    "max_normalize": {"aggr": "max", "normalize": True},
    "mean_no_root": {"root_weight": False},
    "sum_no_root_normalize": {"aggr": "sum", "root_weight": False, "normalize": True},
    "mean_project": {"project": True},
    "no_bias": {"bias": False},
}


# out < in takes the transform-before-aggregate path for sum / mean ("shrink");
# out >= in aggregates first ("widen"); max / min always aggregate first.
SAGE_CASES = [(cfg, 3) for cfg in sorted(SAGE_CONFIGS)] + [
    (cfg, 7) for cfg in ("mean", "sum", "mean_normalize", "mean_no_root", "mean_project",
                         "no_bias")]


@pytest.mark.parametrize("cfg,out_features", SAGE_CASES)
def test_sage_matches_dense(cfg, out_features):
    layer = randomise(SAGEConv(5, out_features, **SAGE_CONFIGS[cfg], rngs=nnx.Rngs(7)), 8)
    for k, name in enumerate(GRAPH_IDS):
        n, ei = GRAPHS[name]
        x = features(60 + k, n, 5)
        check(apply(layer, jnp.asarray(x), jnp.asarray(ei, jnp.int32)), ref_sage(layer, x, ei))


@pytest.mark.parametrize("aggr", ["mean", "max", "sum"])
@pytest.mark.parametrize("ns,nd,e", BIPARTITE)
def test_sage_bipartite_matches_dense(aggr, ns, nd, e):
    layer = randomise(SAGEConv((5, 3), 4, aggr=aggr, rngs=nnx.Rngs(9)), 10)
    ei = _bipartite(ns * 10 + nd, ns, nd, e) if e else np.zeros((2, 0), np.int64)
    xs, xd = features(5, ns, 5), features(6, nd, 3)
    out = apply(layer, (jnp.asarray(xs), jnp.asarray(xd)), jnp.asarray(ei, jnp.int32))
    check(out, ref_sage(layer, (xs, xd), ei))


# ============================================================================ GIN
GIN_CONFIGS = {
    "default": {},
    "eps": {"eps": 0.3},
    "train_eps": {"eps": -0.2, "train_eps": True},
    "hidden": {"hidden_features": 9},
}


@pytest.mark.parametrize("cfg", sorted(GIN_CONFIGS))
def test_gin_matches_dense(cfg):
    layer = randomise(GINConv(5, 4, **GIN_CONFIGS[cfg], rngs=nnx.Rngs(11)), 12)
    for k, name in enumerate(GRAPH_IDS):
        n, ei = GRAPHS[name]
        x = features(70 + k, n, 5)
        check(apply(layer, jnp.asarray(x), jnp.asarray(ei, jnp.int32)), ref_gin(layer, x, ei))


@pytest.mark.parametrize("ns,nd,e", BIPARTITE)
def test_gin_bipartite_matches_dense(ns, nd, e):
    layer = randomise(GINConv(4, 3, eps=0.1, rngs=nnx.Rngs(13)), 14)
    ei = _bipartite(ns * 10 + nd, ns, nd, e) if e else np.zeros((2, 0), np.int64)
    xs, xd = features(7, ns, 4), features(8, nd, 4)
    out = apply(layer, (jnp.asarray(xs), jnp.asarray(xd)), jnp.asarray(ei, jnp.int32))
    check(out, ref_gin(layer, (xs, xd), ei))


# ====================================================================== BatchNorm
@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("n", [2, 7, 30])
def test_batchnorm_train_matches_reference(n, affine):
    bn = randomise(BatchNorm(4, affine=affine), 15)
    for step in range(3):  # running stats accumulate over calls
        x = features(80 + step, n, 4) * 3 + 1
        ref_out, ref_mean, ref_var = ref_batchnorm_train(bn, x)
        check(apply(bn, jnp.asarray(x)), ref_out)
        check(P(bn.mean), ref_mean)
        check(P(bn.var), ref_var)


def test_batchnorm_train_masked_matches_reference():
    bn = randomise(BatchNorm(3, momentum=0.3), 16)
    x = features(90, 8, 3)
    mask = np.array([1, 0, 1, 1, 0, 1, 1, 0], bool)
    ref_out, ref_mean, ref_var = ref_batchnorm_train(bn, x, mask)
    check(apply(bn, jnp.asarray(x), mask=jnp.asarray(mask)), ref_out)
    check(P(bn.mean), ref_mean)
    check(P(bn.var), ref_var)


@pytest.mark.parametrize("n", [1, 6])
def test_batchnorm_eval_matches_reference(n):
    bn = randomise(BatchNorm(4), 17)
    x = features(91, n, 4)
    mean0, var0 = P(bn.mean), P(bn.var)
    check(apply(bn, jnp.asarray(x), use_running_average=True), ref_batchnorm_eval(bn, x))
    bn.eval()
    check(bn(jnp.asarray(x)), ref_batchnorm_eval(bn, x))
    # evaluation never touches the running statistics
    np.testing.assert_array_equal(P(bn.mean), mean0)
    np.testing.assert_array_equal(P(bn.var), var0)


# ========================================================================= models
ACTS = {
    "relu": lambda z: np.maximum(z, 0.0),
    "elu": lambda z: np.where(z > 0, z, np.expm1(np.minimum(z, 0.0))),
    "tanh": np.tanh,
    "identity": lambda z: z,
}

REFS = {GCNConv: "gcn", GATConv: "gat", SAGEConv: "sage", GINConv: "gin"}


def ref_gnn(model, x, ei, edge_weight=None, edge_attr=None):
    """Eval-mode reference composed from the per-layer references."""
    act = ACTS[model.activation]
    h = _x64(x)
    for k, conv in enumerate(model.convs):
        kind = REFS[type(conv)]
        if kind == "gcn":
            z = ref_gcn(conv, h, ei, edge_weight)
        elif kind == "gat":
            z = (ref_gat_edge(conv, h, ei, edge_attr)[0] if conv.edge_dim is not None
                 else ref_gat(conv, h, ei)[0])
        elif kind == "sage":
            z = ref_sage(conv, h, ei)
        else:
            z = ref_gin(conv, h, ei)
        if k < model.num_hidden:
            if len(model.norms):
                z = ref_batchnorm_eval(model.norms[k], z)
            z = act(z)
            if model.residual and z.shape == h.shape:
                z = z + h
        h = z
    if model.head is not None:
        h = h @ P(model.head.kernel) + P(model.head.bias)
    return h


MODEL_CONFIGS = {
    "mixed_bn_residual": dict(
        convs=[ConvSpec("gcn", 8), ConvSpec("gat", 8, {"heads": 2}),
               ConvSpec("sage", 8, {"aggr": "max"}), ConvSpec("gin", 3)],
        norm="batch", residual=True, activation="elu", dropout=0.5),
    "mixed_head_edge_feats": dict(
        convs=[ConvSpec("gat", 6, {"heads": 3, "edge_dim": 2}),
               ConvSpec("gcn", 5, {"improved": True}), ConvSpec("sage", 4),
               ConvSpec("gin", 4, {"eps": 0.2})],
        norm="batch", head=True, out_features=3, activation="tanh"),
    "mixed_plain": dict(
        convs=[ConvSpec("sage", 6, {"aggr": "sum", "normalize": True}),
               ConvSpec("gin", 6, {"train_eps": True}),
               ConvSpec("gat", 4, {"heads": 2, "concat": False})],
        activation="relu"),
}


@pytest.mark.parametrize("cfg", sorted(MODEL_CONFIGS))
def test_gnn_eval_matches_composed_reference(cfg):
    model = randomise(GNN(5, **MODEL_CONFIGS[cfg], rngs=nnx.Rngs(21)), 22)
    model.eval()
    for k, name in enumerate(GRAPH_IDS):
        n, ei = GRAPHS[name]
        x = features(100 + k, n, 5)
        w = edge_weight(110 + k, ei)
        ea = features(120 + k, ei.shape[1], 2)
        out = apply(model, jnp.asarray(x), jnp.asarray(ei, jnp.int32), jnp.asarray(w),
                    jnp.asarray(ea))
        check(out, ref_gnn(model, x, ei, w, ea))


def test_gnn_with_edge_dim_on_graph_without_edges():
    model = randomise(GNN(5, **MODEL_CONFIGS["mixed_head_edge_feats"], rngs=nnx.Rngs(21)), 22)
    model.eval()
    n, ei = GRAPHS["no_edges"]
    x = features(5, n, 5)
    out = apply(model, jnp.asarray(x), jnp.asarray(ei, jnp.int32), jnp.zeros((0,)),
                jnp.zeros((0, 2)))
    check(out, ref_gnn(model, x, ei, np.zeros(0), np.zeros((0, 2))))

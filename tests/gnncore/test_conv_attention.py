"""GATv2Conv and TransformerConv: dense references, symmetries, jit, gradients,
layer behaviour and a differential test against JraphX 0.1.0.

The references (``ref_gatv2``, ``ref_transformer``) are written from the maths
(PyG semantics) as float64 numpy loops over the edges; they only read the
layer's parameters. Parameters are random noise (biases included), so a
dropped or misplaced term shows up.

JraphX divergences found (read from its source, confirmed by the tests below):

- GATv2 with ``edge_dim`` and a reducing ``fill_value`` ("mean", ...) on a graph
  that already has self-loops: JraphX reduces over the incoming edge features
  *including* the old loops; gnncore excludes them, as PyG does (it removes
  the loops first). ``test_jraphx_gatv2_existing_loops_pyg_semantics``
  compares gnncore on the looped graph with JraphX on the loop-free graph.
- GATv2 built for a bipartite input (tuple ``in_features``) with ``bias=True``:
  JraphX has no output ``bias`` (only the ``lin_l`` / ``lin_r`` biases); PyG and
  gnncore add one. Compared with gnncore's output bias added to JraphX's output.
- TransformerConv: JraphX fuses the three projections into ``lin_qkv`` (kernel
  ``[F, 3HC]`` = ``[W_q | W_k | W_v]``), always gives ``lin_qkv`` and
  ``lin_skip`` a bias (PyG and gnncore follow ``bias`` in all four), has no
  bipartite input and no ``return_attention_weights``. Compared on ordinary
  graphs, with those biases set to 0 in JraphX when gnncore has none.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from graphs import random_graph, union

from gnncore.conv.gatv2 import GATv2Conv
from gnncore.conv.transformer import TransformerConv
from gnncore.sparse import Adjacency

ATOL = 1e-5
F_IN, EDGE_DIM = 5, 3


# ------------------------------------------------------------------------ graphs
GRAPHS = {
    "union": union([
        (9, random_graph(0, 8, 16)),                      # node 8 isolated
        (6, random_graph(1, 6, 25, loops=4, dups=5)),     # dense, loops, duplicates
        (6, np.array([[0, 1, 1, 2, 0, 4, 4, 4, 2, 1],     # 3, 5 isolated; duplicated
                      [1, 0, 0, 0, 2, 4, 4, 1, 2, 2]])),  # loop on 4, loop on 2
        (5, np.array([[1, 2, 3, 4], [0, 0, 0, 0]])),      # star: leaves get nothing
        (1, np.zeros((2, 0), np.int64)),                  # isolated node
        (1, np.array([[0], [0]])),                        # only a loop
        (2, np.array([[0, 0], [1, 1]])),                  # duplicate edge only
    ], 0),
    "single_node": (1, np.zeros((2, 0), np.int64)),
    "single_node_loop": (1, np.array([[0], [0]])),
    "no_edges": (5, np.zeros((2, 0), np.int64)),
}


def graph_data(name, seed=0):
    n, ei = GRAPHS[name]
    rng = np.random.default_rng(seed)
    return (rng.normal(size=(n, F_IN)).astype(np.float32), np.asarray(ei, np.int32),
            rng.normal(size=(ei.shape[1], EDGE_DIM)).astype(np.float32))


def bipartite_data(seed=0, num_src=7, num_dst=5, f_dst=4):
    """Target ``num_dst - 1`` receives nothing; three duplicated edges."""
    rng = np.random.default_rng(seed)
    src = rng.integers(0, num_src, 14)
    dst = rng.integers(0, num_dst - 1, 14)
    src, dst = np.concatenate([src, src[:3]]), np.concatenate([dst, dst[:3]])
    x = (rng.normal(size=(num_src, F_IN)).astype(np.float32),
         rng.normal(size=(num_dst, f_dst)).astype(np.float32))
    return x, np.stack([src, dst]).astype(np.int32), rng.normal(
        size=(src.shape[0], EDGE_DIM)).astype(np.float32)


# ----------------------------------------------------------------------- helpers
def build(make, seed):
    """Build a module without running its initialisers, then fill every
    parameter with N(0, 0.5^2) noise (biases included)."""
    module = nnx.eval_shape(make)
    rng = np.random.default_rng(seed)
    state = nnx.state(module, nnx.Param)
    nnx.update(module, jax.tree_util.tree_map(
        lambda s: jnp.asarray(rng.normal(scale=0.5, size=s.shape), s.dtype), state))
    return module


# Small programs that run once: XLA's optimisation passes cost far more compile
# time than they save (no fast-math; the computed values are the same).
_FAST = {"xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True,
         "xla_cpu_use_fusion_emitters": False}


def fast_jit(fn, **kwargs):
    return jax.jit(fn, compiler_options=_FAST, **kwargs)


def _run(graphdef, state, args, static):
    return nnx.merge(graphdef, state)(*args, **dict(static))


_run_jit = fast_jit(_run, static_argnums=(0, 3))


def apply(module, *args, **static):
    """A deterministic forward under ``jax.jit`` (one compile per layer/shape)."""
    graphdef, state = nnx.split(module)
    args = jax.tree_util.tree_map(jnp.asarray, args)
    return _run_jit(graphdef, state, args, tuple(sorted(static.items())))


def P(v):
    if isinstance(v, nnx.Variable):
        v = v[...]
    return np.asarray(v, np.float64)


def close(actual, expected, what="output", atol=ATOL):
    actual, expected = np.asarray(actual, np.float64), np.asarray(expected, np.float64)
    assert actual.shape == expected.shape, (what, actual.shape, expected.shape)
    assert np.all(np.isfinite(actual)), f"{what}: non-finite values"
    err = float(np.max(np.abs(actual - expected), initial=0.0))
    assert err <= atol, f"{what}: max abs error {err:.3g} > {atol}"
    return err


def _lin(layer_lin, x):
    out = x @ P(layer_lin.kernel)
    return out if layer_lin.bias is None else out + P(layer_lin.bias)


def _softmax_by_target(logits, targets, n):
    """logits [E, H], targets [E] -> alpha [E, H] normalised per target node."""
    alpha = np.zeros_like(logits)
    for i in range(n):
        rows = np.flatnonzero(targets == i)
        if rows.size:
            z = np.exp(logits[rows] - logits[rows].max(axis=0))
            alpha[rows] = z / z.sum(axis=0)
    return alpha


# -------------------------------------------------------------------- references
def ref_gatv2(layer, x, edge_index, edge_attr=None):
    """Returns (out, alpha) with alpha in the layer's documented edge layout."""
    H, C = layer.heads, layer.out_features
    xs, xd = (x if isinstance(x, tuple) else (x, x))
    xs, xd = np.asarray(xs, np.float64), np.asarray(xd, np.float64)
    hs = _lin(layer.lin_l, xs).reshape(-1, H, C)
    hd = _lin(layer.lin_r, xd).reshape(-1, H, C)
    n = xd.shape[0]
    ei = np.asarray(edge_index)
    E = ei.shape[1]
    ea = None if edge_attr is None else np.asarray(edge_attr, np.float64)
    # (src, dst, attr or None, used?) for each edge of the layout
    edges = [(ei[0, e], ei[1, e], None if ea is None else ea[e],
              not (layer.add_self_loops and ei[0, e] == ei[1, e])) for e in range(E)]
    if layer.add_self_loops:
        for i in range(n):
            attr = None
            if ea is not None:
                incoming = [ea[e] for e in range(E) if ei[1, e] == i and ei[0, e] != i]
                fv = layer.fill_value
                if not isinstance(fv, str):
                    attr = np.full(EDGE_DIM, float(fv))
                elif not incoming:
                    attr = np.zeros(EDGE_DIM)
                else:
                    attr = {"mean": np.mean, "add": np.sum, "sum": np.sum, "max": np.max,
                            "min": np.min}[fv](np.stack(incoming), axis=0)
            edges.append((i, i, attr, True))
    att = P(layer.att).reshape(H, C)
    logits = np.full((len(edges), H), -np.inf)
    for k, (j, i, attr, used) in enumerate(edges):
        if not used:
            continue
        z = hs[j] + hd[i]
        if attr is not None:
            z = z + (attr @ P(layer.lin_edge.kernel)).reshape(H, C)
        z = np.where(z >= 0, z, layer.negative_slope * z)
        logits[k] = np.sum(z * att, axis=-1)
    used = np.array([u for *_, u in edges], bool)
    targets = np.array([i for _, i, _, _ in edges], np.int64)
    alpha = np.zeros((len(edges), H))
    alpha[used] = _softmax_by_target(logits[used], targets[used], n)
    out = np.zeros((n, H, C))
    for k, (j, i, _, _) in enumerate(edges):
        out[i] += alpha[k][:, None] * hs[j]
    out = out.reshape(n, H * C) if layer.concat else out.mean(axis=1)
    if layer.res is not None:
        out = out + xd @ P(layer.res.kernel)
    if layer.bias is not None:
        out = out + P(layer.bias)
    return out, alpha


def ref_transformer(layer, x, edge_index, edge_attr=None):
    """Returns (out, alpha [E, H])."""
    H, C = layer.heads, layer.out_features
    xs, xd = (x if isinstance(x, tuple) else (x, x))
    xs, xd = np.asarray(xs, np.float64), np.asarray(xd, np.float64)
    q = _lin(layer.lin_query, xd).reshape(-1, H, C)
    k = _lin(layer.lin_key, xs).reshape(-1, H, C)
    v = _lin(layer.lin_value, xs).reshape(-1, H, C)
    n = xd.shape[0]
    ei = np.asarray(edge_index)
    E = ei.shape[1]
    we = np.zeros((E, H, C))
    if edge_attr is not None:
        we = (np.asarray(edge_attr, np.float64) @ P(layer.lin_edge.kernel)).reshape(E, H, C)
    logits = np.zeros((E, H))
    for e in range(E):
        j, i = ei[:, e]
        logits[e] = np.sum(q[i] * (k[j] + we[e]), axis=-1) / np.sqrt(C)
    alpha = _softmax_by_target(logits, ei[1], n)
    m = np.zeros((n, H, C))
    for e in range(E):
        j, i = ei[:, e]
        m[i] += alpha[e][:, None] * (v[j] + we[e])
    m = m.reshape(n, H * C) if layer.concat else m.mean(axis=1)
    if not layer.root_weight:
        return m, alpha
    r = _lin(layer.lin_skip, xd)
    if layer.beta:
        g = 1.0 / (1.0 + np.exp(-(np.concatenate([m, r, m - r], axis=1)
                                  @ P(layer.lin_beta.kernel))))
        return g * r + (1.0 - g) * m, alpha
    return m + r, alpha


# ------------------------------------------------------------- dense comparisons
GATV2_CASES = {
    "h2": dict(heads=2),
    "h3_mean_no_loops": dict(heads=3, concat=False, add_self_loops=False,
                             negative_slope=0.1),
    "edge_mean_residual": dict(heads=2, edge_dim=EDGE_DIM, residual=True),
    "edge_max_shared": dict(heads=2, edge_dim=EDGE_DIM, fill_value="max",
                            share_weights=True),
    "edge_add": dict(edge_dim=EDGE_DIM, fill_value="add"),
    "edge_min_mean_heads": dict(heads=2, concat=False, edge_dim=EDGE_DIM, fill_value="min",
                                residual=True),
    "edge_const_no_bias": dict(heads=2, edge_dim=EDGE_DIM, fill_value=0.5, bias=False),
}
TRANSFORMER_CASES = {
    "h2": dict(heads=2),
    "mean_beta_edge": dict(heads=2, concat=False, beta=True, edge_dim=EDGE_DIM),
    "no_root_edge": dict(heads=2, root_weight=False, edge_dim=EDGE_DIM),
    "beta_no_bias": dict(heads=3, beta=True, bias=False),
}
EDGE_GRAPHS = ["single_node", "single_node_loop", "no_edges"]
DENSE_PARAMS = (
    [("gatv2", c, "union") for c in GATV2_CASES]
    + [("gatv2", c, g) for c in ("h2", "edge_mean_residual") for g in EDGE_GRAPHS]
    + [("transformer", c, "union") for c in TRANSFORMER_CASES]
    + [("transformer", c, g) for c in ("h2", "mean_beta_edge") for g in EDGE_GRAPHS])


def make_layer(kind, case, in_features=F_IN, out_features=4, seed=1):
    cls, cases = ((GATv2Conv, GATV2_CASES) if kind == "gatv2"
                  else (TransformerConv, TRANSFORMER_CASES))
    opts = cases[case] if isinstance(case, str) else case
    return build(lambda: cls(in_features, out_features, rngs=nnx.Rngs(0), **opts), seed)


def reference(layer, *args):
    return (ref_gatv2 if isinstance(layer, GATv2Conv) else ref_transformer)(layer, *args)


@pytest.mark.parametrize("kind,case,graph", DENSE_PARAMS,
                         ids=[f"{k}-{c}-{g}" for k, c, g in DENSE_PARAMS])
def test_dense_reference(kind, case, graph):
    layer = make_layer(kind, case)
    x, ei, ea = graph_data(graph)
    ea = ea if layer.edge_dim is not None else None
    out, (ei_used, alpha) = apply(layer, x, ei, ea, return_attention_weights=True)
    ref_out, ref_alpha = reference(layer, x, ei, ea)
    close(out, ref_out, "output")
    close(alpha, ref_alpha, "attention weights")
    assert np.array_equal(np.asarray(ei_used)[:, :ei.shape[1]], ei)


BIPARTITE_PARAMS = {
    "gatv2_edge_residual": ("gatv2", (F_IN, 4), dict(heads=2, add_self_loops=False,
                                                     edge_dim=EDGE_DIM, residual=True)),
    "gatv2_mean_heads": ("gatv2", (F_IN, 4), dict(heads=2, concat=False,
                                                  add_self_loops=False)),
    "transformer_beta_edge": ("transformer", (F_IN, 4), dict(heads=2, beta=True,
                                                             edge_dim=EDGE_DIM)),
    "transformer_mean_heads": ("transformer", (F_IN, 4), dict(heads=2, concat=False)),
}


@pytest.mark.parametrize("name", sorted(BIPARTITE_PARAMS))
def test_dense_reference_bipartite(name):
    kind, in_features, opts = BIPARTITE_PARAMS[name]
    layer = make_layer(kind, opts, in_features=in_features, out_features=3)
    x, ei, ea = bipartite_data()
    ea = ea if layer.edge_dim is not None else None
    out, (_, alpha) = apply(layer, x, ei, ea, return_attention_weights=True)
    ref_out, ref_alpha = reference(layer, x, ei, ea)
    close(out, ref_out, "output")
    close(alpha, ref_alpha, "attention weights")
    assert out.shape[0] == x[1].shape[0]


@pytest.mark.parametrize("share", [False, True], ids=["separate", "shared"])
def test_gatv2_bipartite_equal_sizes_with_self_loops_and_adjacency(share):
    """x_src != x_dst on the same node count: the appended loop of node i sends
    Θ_s x_src[i] (a message from the source side), also on the fused CSR path."""
    layer = make_layer("gatv2", dict(heads=2, edge_dim=EDGE_DIM, share_weights=share))
    x, ei, ea = bipartite_data(seed=3, num_src=6, num_dst=6, f_dst=F_IN)
    order = np.lexsort((ei[0], ei[1]))
    ei, ea = ei[:, order], ea[order]
    adj = Adjacency.from_edge_index(ei, 6)
    ref_out, ref_alpha = ref_gatv2(layer, x, ei, ea)
    for edges in (ei, adj):
        out, (_, alpha) = apply(layer, x, edges, ea, return_attention_weights=True)
        close(out, ref_out, "output")
        close(alpha, ref_alpha, "attention weights")


# -------------------------------------------------------------------- symmetries
SYM_LAYERS = {
    "gatv2_edge": ("gatv2", dict(heads=2, edge_dim=EDGE_DIM, residual=True)),
    "gatv2_no_loops": ("gatv2", dict(heads=2, concat=False, add_self_loops=False,
                                     edge_dim=EDGE_DIM)),
    "transformer_beta_edge": ("transformer", dict(heads=2, beta=True, edge_dim=EDGE_DIM)),
}


@pytest.mark.parametrize("name", sorted(SYM_LAYERS))
def test_permutation_equivariance_and_edge_order_invariance(name):
    kind, opts = SYM_LAYERS[name]
    layer = make_layer(kind, opts, seed=4)
    x, ei, ea = graph_data("union", seed=5)
    n, E = x.shape[0], ei.shape[1]
    out, (_, alpha) = apply(layer, x, ei, ea, return_attention_weights=True)
    rng = np.random.default_rng(6)
    for _ in range(2):
        perm = rng.permutation(n)  # new node k is old node perm[k]
        new_id = np.argsort(perm)
        out_p, (ei_p, alpha_p) = apply(layer, x[perm], new_id[ei], ea,
                                       return_attention_weights=True)
        close(out_p, out[perm], "output under node permutation")
        close(alpha_p[:E], alpha[:E], "alpha of the given edges under node permutation")
        if alpha.shape[0] > E:  # GATv2 with add_self_loops: one loop per node
            close(alpha_p[E:], alpha[E:][perm], "alpha of the added loops under node perm")
        cols = rng.permutation(E)
        out_s, (ei_s, alpha_s) = apply(layer, x, ei[:, cols], ea[cols],
                                       return_attention_weights=True)
        close(out_s, out, "output under edge shuffle")
        assert np.array_equal(np.asarray(ei_s)[:, :E], ei[:, cols])
        close(alpha_s[:E], alpha[cols], "alpha under edge shuffle")
        close(alpha_s[E:], alpha[E:], "alpha of the added loops under edge shuffle")


@pytest.mark.parametrize("kind", ["gatv2", "transformer"])
def test_adjacency_input_matches_edge_index(kind):
    """An Adjacency (fused CSR sum) gives the same output, attention weights and
    input gradient as the plain edge list in the same (target-sorted) order."""
    layer = make_layer(kind, dict(heads=2, edge_dim=EDGE_DIM), seed=7)
    x, ei, ea = graph_data("union", seed=8)
    order = np.lexsort((ei[0], ei[1]))
    ei, ea = ei[:, order], jnp.asarray(ea[order])
    adj = Adjacency.from_edge_index(ei, x.shape[0])
    cot = jnp.asarray(np.random.default_rng(9).normal(size=(x.shape[0], 8)), jnp.float32)

    @fast_jit
    def both(x):
        def f(edges):
            def loss(x):
                out, (_, alpha) = layer(x, edges, ea, return_attention_weights=True)
                return jnp.sum(out * cot) + jnp.sum(alpha), (out, alpha)
            return jax.grad(loss, has_aux=True)(x)
        return f(jnp.asarray(ei)), f(adj)

    (g0, (o0, a0)), (g1, (o1, a1)) = both(jnp.asarray(x))
    close(o1, o0, "output")
    close(a1, a0, "attention weights")
    close(g1, g0, "gradient wrt x")


# -------------------------------------------------------------- jit and gradients
ZOO = {
    "gatv2_full": lambda r: GATv2Conv(F_IN, 3, heads=2, edge_dim=EDGE_DIM, residual=True,
                                      dropout=0.3, rngs=r),
    "gatv2_shared_mean": lambda r: GATv2Conv(F_IN, 3, heads=2, concat=False,
                                             share_weights=True, rngs=r),
    "transformer_full": lambda r: TransformerConv(F_IN, 3, heads=2, beta=True,
                                                  edge_dim=EDGE_DIM, dropout=0.3, rngs=r),
    "transformer_mean_no_root": lambda r: TransformerConv(F_IN, 3, heads=2, concat=False,
                                                          root_weight=False, rngs=r),
}


def _zoo(name, seed=0):
    return ZOO[name](nnx.Rngs(params=seed, dropout=seed + 1))


def _inputs(graph="union", seed=10):
    x, ei, ea = graph_data(graph, seed)
    return jnp.asarray(x), jnp.asarray(ei), jnp.asarray(ea)


def _call(m, x, ei, ea):
    return m(x, ei, ea if m.edge_dim is not None else None)


@pytest.mark.parametrize("name", ["gatv2_full", "transformer_full"])
def test_jit_matches_eager_in_eval_and_train(name):
    x, ei, ea = _inputs()
    module = _zoo(name)
    module.eval()  # a pure eval forward: plain jax.jit is safe too
    close(apply(module, x, ei, ea if module.edge_dim is not None else None),
          _call(module, x, ei, ea), "eval jit vs eager")
    # Train mode: identical modules draw the same dropout masks, jitted or not.
    eager_mod, jit_mod = _zoo(name), _zoo(name)
    eager_mod.train()
    jit_mod.train()
    step = nnx.jit(_call)
    for _ in range(2):
        close(step(jit_mod, x, ei, ea), _call(eager_mod, x, ei, ea), "train jit vs eager")


@pytest.mark.parametrize("name", sorted(ZOO))
def test_every_parameter_gets_a_finite_nonzero_gradient(name):
    module = _zoo(name)
    module.eval()
    x, ei, ea = _inputs()
    probe = jnp.asarray(np.random.default_rng(1).normal(size=(x.shape[0], 6)), jnp.float32)
    graphdef, state = nnx.split(module)

    @fast_jit
    def grads(state, x, ei, ea):
        p = probe[:x.shape[0], :_width(module)]
        m = nnx.merge(graphdef, state)
        return nnx.grad(lambda m: jnp.sum(_call(m, x, ei, ea) * p))(m)

    flat = nnx.to_flat_state(grads(state, x, ei, ea))
    assert len(flat) == len(jax.tree.leaves(nnx.state(module, nnx.Param))) > 0
    for path, var in flat:
        g = np.asarray(var.get_value())
        assert np.all(np.isfinite(g)), path
        assert np.any(g != 0), f"zero gradient for {'/'.join(map(str, path))}"
    # No edges at all: still finite everywhere.
    x0, ei0, ea0 = _inputs("no_edges")
    for path, var in nnx.to_flat_state(grads(state, x0, ei0, ea0)):
        assert np.all(np.isfinite(np.asarray(var.get_value()))), path


def _width(m):
    return m.heads * m.out_features if m.concat else m.out_features


# ------------------------------------------------------------------ layer details
@pytest.mark.parametrize("kind", ["gatv2", "transformer"])
def test_attention_weights_are_a_softmax_per_target(kind):
    layer = make_layer(kind, dict(heads=3, edge_dim=EDGE_DIM), seed=11)
    x, ei, ea = graph_data("union", seed=12)
    n = x.shape[0]
    out, (index, alpha) = apply(layer, x, ei, ea, return_attention_weights=True)
    alpha, index = np.asarray(alpha), np.asarray(index)
    assert alpha.shape == (index.shape[1], 3) and np.all(alpha >= 0)
    sums = np.zeros((n, 3))
    np.add.at(sums, index[1], alpha)
    if kind == "gatv2":  # every node has its loop; old loops get exactly 0
        close(sums, np.ones((n, 3)), "alpha sums", atol=1e-5)
        old_loops = np.flatnonzero(ei[0] == ei[1])
        assert old_loops.size and np.all(alpha[old_loops] == 0)
    else:  # no loops added: nodes without in-edges have no weights at all
        has_in = np.isin(np.arange(n), ei[1])
        assert not has_in.all()
        close(sums[has_in], np.ones((has_in.sum(), 3)), "alpha sums", atol=1e-5)
        assert np.all(sums[~has_in] == 0)
        # ... and their aggregation is 0: the output is the skip term alone
        skip = _lin(layer.lin_skip, np.asarray(x, np.float64))
        close(np.asarray(out)[~has_in], skip[~has_in], "isolated node output")


@pytest.mark.parametrize("name", ["gatv2_full", "transformer_full"])
def test_dropout_only_in_train_mode_on_its_own_stream(name):
    x, ei, ea = _inputs(seed=13)
    layer = _zoo(name, seed=2)

    def alpha():
        return np.asarray(layer(x, ei, ea, return_attention_weights=True)[1][1])

    layer.train()
    a, b = alpha(), alpha()
    assert not np.array_equal(a, b)  # a new mask each call
    assert np.any(a == 0) and np.any(a > 1.0)  # dropped / rescaled by 1 / (1 - p)
    layer.eval()
    c, d = alpha(), alpha()
    np.testing.assert_array_equal(c, d)
    # eval == the same weights without dropout
    no_drop = nnx.eval_shape(lambda: ZOO[name](nnx.Rngs(0)))
    no_drop.dropout = None
    nnx.update(no_drop, nnx.state(layer, nnx.Param))
    close(_call(layer, x, ei, ea), _call(no_drop, x, ei, ea), "eval vs no dropout")
    streams = [p for p, _ in nnx.to_flat_state(nnx.state(layer, nnx.RngState))]
    assert streams and all(p[0] == "dropout" for p in streams)


def test_gatv2_share_weights_uses_one_matrix():
    shared = make_layer("gatv2", dict(heads=2, share_weights=True), seed=14)
    assert shared.lin_r is shared.lin_l
    paths = ["/".join(map(str, p)) for p, _ in nnx.to_flat_state(nnx.state(shared, nnx.Param))]
    assert sorted(paths) == ["att", "bias", "lin_l/bias", "lin_l/kernel"]
    # Same as an unshared layer whose lin_r holds a copy of lin_l ...
    twin = make_layer("gatv2", dict(heads=2), seed=15)
    for name in ("att", "bias"):
        getattr(twin, name)[...] = getattr(shared, name)[...]
    for lin in (twin.lin_l, twin.lin_r):
        lin.kernel[...] = shared.lin_l.kernel[...]
        lin.bias[...] = shared.lin_l.bias[...]
    x, ei, _ = _inputs(seed=16)
    close(apply(shared, x, ei), apply(twin, x, ei), "shared vs copied weights")

    # ... and the shared kernel's gradient is the sum of the twin's two.
    def kernel_grads(m):
        return nnx.grad(lambda m: jnp.sum(jnp.sin(m(x, ei))))(m)

    (gd_s, st_s), (gd_t, st_t) = nnx.split(shared), nnx.split(twin)
    g_shared, g_twin = fast_jit(lambda a, b: (kernel_grads(nnx.merge(gd_s, a)),
                                              kernel_grads(nnx.merge(gd_t, b))))(st_s, st_t)
    close(g_shared["lin_l"]["kernel"].get_value(),
          g_twin["lin_l"]["kernel"].get_value() + g_twin["lin_r"]["kernel"].get_value(),
          "gradient of the shared kernel")


@pytest.mark.parametrize("concat", [True, False], ids=["concat", "mean"])
def test_transformer_beta_gate(concat):
    H, C = 2, 3
    layer = make_layer("transformer", dict(heads=H, concat=concat, beta=True), out_features=C,
                       seed=17)
    width = H * C if concat else C
    assert layer.lin_beta.kernel[...].shape == (3 * width, 1)
    assert layer.lin_skip.kernel[...].shape == (F_IN, width)
    x, ei, _ = _inputs(seed=18)
    out = apply(layer, x, ei)
    assert out.shape == (x.shape[0], width)
    # A zero gate weight gives beta = 1/2: the mean of skip and aggregation.
    no_root = make_layer("transformer", dict(heads=H, concat=concat, root_weight=False),
                         out_features=C)
    for name in ("lin_query", "lin_key", "lin_value"):
        nnx.update(getattr(no_root, name), nnx.state(getattr(layer, name)))
    layer.lin_beta.kernel[...] = jnp.zeros((3 * width, 1))
    skip = _lin(layer.lin_skip, np.asarray(x, np.float64))
    close(apply(layer, x, ei), 0.5 * (skip + np.asarray(apply(no_root, x, ei))), "beta=1/2")
    # beta needs the skip term; without root_weight it is ignored (as in PyG)
    assert TransformerConv(F_IN, C, beta=True, root_weight=False, rngs=nnx.Rngs(0)).lin_beta \
        is None


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no_bias"])
def test_transformer_bias_reaches_query_key_value_and_skip(bias):
    """PyG 2.8.1 builds lin_key, lin_query, lin_value and lin_skip with
    ``bias=bias``; lin_edge never has a bias."""
    layer = nnx.eval_shape(lambda: TransformerConv(F_IN, 3, heads=2, edge_dim=EDGE_DIM,
                                                   bias=bias, rngs=nnx.Rngs(0)))
    for name in ("lin_key", "lin_query", "lin_value", "lin_skip"):
        assert (getattr(layer, name).bias is not None) == bias, name
    assert layer.lin_edge.bias is None
    paths = {"/".join(map(str, p)) for p, _ in nnx.to_flat_state(nnx.state(layer, nnx.Param))}
    biases = {p for p in paths if p.endswith("bias")}
    expected = {"lin_key/bias", "lin_query/bias", "lin_value/bias", "lin_skip/bias"}
    assert biases == (expected if bias else set())


def test_input_errors():
    """Bad inputs are refused before any computation (the layers are abstract
    here: a check that came too late would fail on the missing weights)."""
    x, ei, ea = _inputs(seed=19)

    def abstract(cls, *args, **kwargs):
        return nnx.eval_shape(lambda: cls(*args, rngs=nnx.Rngs(0), **kwargs))

    with pytest.raises(ValueError, match="pass edge_attr"):
        abstract(GATv2Conv, F_IN, 3, edge_dim=EDGE_DIM)(x, ei)
    with pytest.raises(ValueError, match="pass edge_attr"):
        abstract(TransformerConv, F_IN, 3, edge_dim=EDGE_DIM)(x, ei)
    with pytest.raises(ValueError, match="without edge_dim"):
        abstract(GATv2Conv, F_IN, 3)(x, ei, ea)
    with pytest.raises(ValueError, match="without edge_dim"):
        abstract(TransformerConv, F_IN, 3)(x, ei, ea)
    with pytest.raises(ValueError, match="add_self_loops=False"):
        abstract(GATv2Conv, (F_IN, 2), 3)((x, jnp.ones((4, 2))), ei)
    with pytest.raises(ValueError, match="target features"):
        abstract(GATv2Conv, F_IN, 3)((x, None), ei)
    with pytest.raises(ValueError, match="target features"):
        abstract(TransformerConv, F_IN, 3)((x, None), ei)
    with pytest.raises(ValueError, match="fill_value"):
        abstract(GATv2Conv, F_IN, 3, fill_value="mul")
    with pytest.raises(ValueError, match="share_weights"):
        abstract(GATv2Conv, (F_IN, 4), 3, share_weights=True)


# ------------------------------------------------------------------------ JraphX
jraphx_conv = pytest.importorskip("jraphx.nn.conv")


def _copy(dst, value):
    value = jnp.asarray(value)
    assert dst.get_value().shape == value.shape, (dst.get_value().shape, value.shape)
    dst.set_value(value)


def jraphx_gatv2(g, in_features, opts):
    j = nnx.eval_shape(lambda: jraphx_conv.GATv2Conv(in_features, g.out_features,
                                                     rngs=nnx.Rngs(0), **opts))
    for name in ("lin_l", "lin_r") if not g.share_weights else ("lin_l",):
        _copy(getattr(j, name).kernel, getattr(g, name).kernel[...])
        if g.lin_l.bias is not None:
            _copy(getattr(j, name).bias, getattr(g, name).bias[...])
    assert (j.lin_r is j.lin_l) == g.share_weights
    _copy(j.att, g.att[...].reshape(g.heads, g.out_features))
    if g.lin_edge is not None:
        _copy(j.lin_edge.kernel, g.lin_edge.kernel[...])
    if g.res is not None:
        _copy(j.res.kernel, g.res.kernel[...])
    if j.bias is not None:
        _copy(j.bias, g.bias[...])
    return j


def jraphx_transformer(t, opts):
    opts = dict(opts)
    opts["dropout_rate"] = opts.pop("dropout", 0.0)
    opts.pop("bias", None)
    j = nnx.eval_shape(lambda: jraphx_conv.TransformerConv(F_IN, t.out_features,
                                                           rngs=nnx.Rngs(0), **opts))
    lins = (t.lin_query, t.lin_key, t.lin_value)
    _copy(j.lin_qkv.kernel, jnp.concatenate([lin.kernel[...] for lin in lins], axis=1))
    _copy(j.lin_qkv.bias, jnp.concatenate([jnp.zeros(lin.out_features) if lin.bias is None
                                           else lin.bias[...] for lin in lins]))
    if t.lin_edge is not None:
        _copy(j.lin_edge.kernel, t.lin_edge.kernel[...])
    if t.lin_skip is not None:
        _copy(j.lin_skip.kernel, t.lin_skip.kernel[...])
        skip_bias = t.lin_skip.bias
        _copy(j.lin_skip.bias, jnp.zeros(j.lin_skip.bias.shape) if skip_bias is None
              else skip_bias[...])
    if t.lin_beta is not None:
        _copy(j.lin_beta.kernel, t.lin_beta.kernel[...])
    return j


def jraphx_graph(kind, seed):
    """14 nodes, 2 isolated, duplicated edges; ``loops`` adds self-loops on 0
    and 3 (twice) and on an otherwise isolated node."""
    rng = np.random.default_rng(seed)
    n = 14
    src, dst = rng.integers(0, n - 3, 30), rng.integers(0, n - 3, 30)
    keep = src != dst
    src, dst = src[keep], dst[keep]
    dup = rng.choice(src.shape[0], 4, replace=False)
    src, dst = np.concatenate([src, src[dup]]), np.concatenate([dst, dst[dup]])
    if kind == "loops":
        src = np.concatenate([src, [0, 3, 3, n - 1]])
        dst = np.concatenate([dst, [0, 3, 3, n - 1]])
    perm = rng.permutation(src.shape[0])
    ei = np.stack([src, dst])[:, perm].astype(np.int32)
    return (rng.normal(size=(n, F_IN)).astype(np.float32), ei,
            rng.normal(size=(ei.shape[1], EDGE_DIM)).astype(np.float32))


def compare_with_grad(f_g, f_j, x, ei, ea, what):
    """``f(x, edge_index, edge_attr)`` of both sides: outputs (and the attention
    weights, if both return them) and the gradient wrt x of a random projection
    of the output, both sides under one jax.jit."""
    cot = jnp.asarray(np.random.default_rng(0).normal(size=(64, 64)), jnp.float32)

    def vg(f, x, ei, ea):
        def loss(x):
            out = f(x, ei, ea)
            o = out[0] if isinstance(out, tuple) else out
            return jnp.sum(o * cot[:o.shape[0], :o.shape[1]]), out
        return jax.value_and_grad(loss, has_aux=True)(x)

    args = jax.tree_util.tree_map(jnp.asarray, (x, ei, ea))
    ((_, out_g), grad_g), ((_, out_j), grad_j) = fast_jit(
        lambda *a: (vg(f_g, *a), vg(f_j, *a)))(*args)
    errs = []
    if isinstance(out_g, tuple):
        errs.append(close(out_g[0], out_j[0], f"{what} output"))
        assert np.array_equal(np.asarray(out_g[1][0]), np.asarray(out_j[1][0]))
        errs.append(close(out_g[1][1], out_j[1][1], f"{what} attention weights"))
    else:
        errs.append(close(out_g, out_j, f"{what} output"))
    errs.append(close(grad_g, grad_j, f"{what} gradient wrt x"))
    return max(errs)


JRAPHX_GATV2 = {
    "h2": dict(heads=2),
    "mean_heads_slope": dict(heads=3, concat=False, negative_slope=0.3),
    "edge_const_residual": dict(heads=2, edge_dim=EDGE_DIM, fill_value=0.5, residual=True),
    "edge_mean_shared": dict(heads=2, edge_dim=EDGE_DIM, share_weights=True),
    "no_loops_no_bias": dict(heads=2, add_self_loops=False, bias=False, edge_dim=EDGE_DIM),
}
JRAPHX_GATV2_PARAMS = ([(c, "loops") for c in JRAPHX_GATV2 if c != "edge_mean_shared"]
                       + [("edge_mean_shared", "basic")])


@pytest.mark.parametrize("case,graph", JRAPHX_GATV2_PARAMS,
                         ids=[f"{c}-{g}" for c, g in JRAPHX_GATV2_PARAMS])
def test_jraphx_gatv2(case, graph):
    opts = JRAPHX_GATV2[case]
    g = make_layer("gatv2", opts, seed=20)
    j = jraphx_gatv2(g, F_IN, opts)
    x, ei, ea = jraphx_graph(graph, seed=21)
    ea = ea if g.edge_dim is not None else None
    compare_with_grad(lambda *a: g(*a, return_attention_weights=True),
                      lambda *a: j(*a, return_attention_weights=True), x, ei, ea, case)


def test_jraphx_gatv2_existing_loops_pyg_semantics():
    """fill_value="mean" on a looped graph: gnncore == JraphX on the graph with
    its loops removed on the host (PyG's remove_self_loops + add_self_loops)."""
    opts = dict(heads=2, edge_dim=EDGE_DIM)
    g = make_layer("gatv2", opts, seed=22)
    j = jraphx_gatv2(g, F_IN, opts)
    x, ei, ea = jraphx_graph("loops", seed=23)
    not_loop = ei[0] != ei[1]
    keep = np.concatenate([not_loop, np.ones(x.shape[0], bool)])

    def f_g(x, ei, ea):
        out, (e, alpha) = g(x, ei, ea, return_attention_weights=True)
        return out, (e[:, keep], alpha[keep])

    def f_j(x, ei, ea):  # the same graph, its self-loops removed
        return j(x, ei[:, not_loop], ea[not_loop], return_attention_weights=True)

    compare_with_grad(f_g, f_j, x, ei, ea, "loops")
    # ... whereas JraphX on the looped graph averages the old loops in too.
    out_j = fast_jit(lambda x, ei, ea: j(x, ei, ea))(x, jnp.asarray(ei), jnp.asarray(ea))
    assert np.max(np.abs(np.asarray(out_j) - np.asarray(apply(g, x, ei, ea)))) > 1e-3


def test_jraphx_gatv2_bipartite():
    opts = dict(heads=2, add_self_loops=False, edge_dim=EDGE_DIM, residual=True)
    g = make_layer("gatv2", opts, in_features=(F_IN, 4), out_features=3, seed=24)
    j = jraphx_gatv2(g, (F_IN, 4), opts)
    assert j.bias is None  # JraphX drops the output bias for tuple in_features
    (xs, xd), ei, ea = bipartite_data(seed=25)
    xd, bias = jnp.asarray(xd), g.bias[...]
    compare_with_grad(lambda x, ei, ea: g((x, xd), ei, ea),
                      lambda x, ei, ea: j((x, xd), ei, ea) + bias, xs, ei, ea, "bipartite")


JRAPHX_TRANSFORMER = {
    "h2": dict(heads=2),
    "mean_beta_edge": dict(heads=2, concat=False, beta=True, edge_dim=EDGE_DIM),
    "no_root_edge": dict(heads=2, root_weight=False, edge_dim=EDGE_DIM),
    "beta_no_bias": dict(heads=3, beta=True, bias=False),
}


@pytest.mark.parametrize("case", sorted(JRAPHX_TRANSFORMER))
def test_jraphx_transformer(case):
    opts = JRAPHX_TRANSFORMER[case]
    t = make_layer("transformer", opts, seed=26)
    j = jraphx_transformer(t, opts)
    x, ei, ea = jraphx_graph("loops", seed=27)
    ea = ea if t.edge_dim is not None else None
    compare_with_grad(t, j, x, ei, ea, case)

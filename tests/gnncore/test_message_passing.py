"""The MessagePassing mechanism: hooks, argument gathering, bipartite inputs."""

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from gnncore import Adjacency, MessagePassing

EI = jnp.array([[0, 1, 2, 2], [1, 2, 0, 1]])
X = jnp.arange(6.0).reshape(3, 2)


class Neighbours(MessagePassing):
    def __call__(self, x, edge_index, **kw):
        return self.propagate(edge_index, x, **kw)


def dense_neighbours(x, ei, n_dst, how):
    x = np.asarray(x)
    out = np.zeros((n_dst, x.shape[1]))
    for t in range(n_dst):
        rows = x[np.asarray(ei[0])[np.asarray(ei[1]) == t]]
        if len(rows):
            out[t] = {"sum": rows.sum(0), "add": rows.sum(0), "mean": rows.mean(0),
                      "max": rows.max(0), "min": rows.min(0)}[how]
    return out


@pytest.mark.parametrize("aggr", ["sum", "add", "mean", "max", "min"])
def test_aggregation_by_name(aggr):
    out = Neighbours(aggr)(X, EI)
    np.testing.assert_allclose(np.asarray(out), dense_neighbours(X, EI, 3, aggr))


def test_unknown_aggregation():
    with pytest.raises(ValueError, match="unknown aggregation 'median'"):
        Neighbours("median")


class EdgeScaled(MessagePassing):
    """Uses x_i, a gathered kwarg (``deg_j``), a plain kwarg and ``update``."""

    def __call__(self, x, edge_index, deg, scale):
        return self.propagate(edge_index, x, deg=deg, scale=scale, shift=100.0)

    def message(self, x_i, x_j, deg_j, scale):
        return scale * (x_j - x_i) / deg_j[:, None]

    def update(self, aggr_out, shift):
        return aggr_out + shift


def test_hooks_receive_gathered_and_plain_arguments():
    deg = jnp.array([1.0, 2.0, 4.0])
    out = np.asarray(EdgeScaled()(X, EI, deg, 0.5))
    x, ei = np.asarray(X), np.asarray(EI)
    want = np.full((3, 2), 100.0)
    for s, t in ei.T:
        want[t] += 0.5 * (x[s] - x[t]) / float(deg[s])
    np.testing.assert_allclose(out, want, rtol=1e-6)


def test_missing_message_argument_is_a_clear_error():
    with pytest.raises(TypeError, match="needs 'deg_j'"):
        EdgeScaled().propagate(EI, X, scale=1.0, shift=0.0)


def test_bipartite_input_and_size():
    x_src = jnp.ones((4, 2))
    x_dst = jnp.zeros((2, 2))
    ei = jnp.array([[0, 1, 3], [0, 0, 1]])
    out = Neighbours("sum")((x_src, x_dst), ei)
    assert np.asarray(out).tolist() == [[2, 2], [1, 1]]
    out = Neighbours("sum").propagate(ei, (x_src, None), size=(4, 5))
    assert out.shape == (5, 2)
    with pytest.raises(ValueError, match="size=\\(num_src, num_dst\\)"):
        Neighbours("sum").propagate(ei, (x_src, None))


class Fused(MessagePassing):
    """Overrides the fused hook: ``message``/``aggregate`` must not run."""

    def __init__(self):
        super().__init__("sum")

    def __call__(self, x, edge_index):
        return self.propagate(edge_index, x, weight=2.0)

    def message(self, x_j):
        raise AssertionError("the fused path must skip message()")

    def message_and_aggregate(self, adj, x_src, x_dst, num_nodes, weight):
        src, dst = adj.edge_index
        dense = jnp.zeros((num_nodes, x_src.shape[0])).at[dst, src].add(weight)
        return dense @ x_src


def test_fused_hook_runs_for_an_adjacency_and_equals_the_generic_path():
    order = np.lexsort((np.asarray(EI[0]), np.asarray(EI[1])))
    adj = Adjacency.from_edge_index(np.asarray(EI)[:, order], 3)
    out = np.asarray(Fused()(X, adj))
    np.testing.assert_allclose(out, 2 * dense_neighbours(X, EI, 3, "sum"))
    with pytest.raises(AssertionError, match="must skip message"):
        Fused()(X, EI)  # a plain edge list takes the generic path
    # max is not linear: even with an Adjacency it takes the generic path.
    maxed = Neighbours("max")(X, adj)
    np.testing.assert_allclose(np.asarray(maxed), dense_neighbours(X, EI, 3, "max"))


def test_message_passing_is_an_nnx_module_and_jits():
    layer = Neighbours("mean")
    out = nnx.jit(lambda m, x, e: m(x, e))(layer, X, EI)
    np.testing.assert_allclose(np.asarray(out), dense_neighbours(X, EI, 3, "mean"))

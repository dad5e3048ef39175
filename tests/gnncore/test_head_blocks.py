"""``Adjacency.with_heads``: the index arrays of multi-head products built once on
the host give the same products and gradients, bit for bit, as the ones a step
computes, and a step that has them computes none."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from jax.extend.core import jaxprs_in_params
from test_sparse import reference, sorted_edges

from gnncore import GNN, Adjacency, ConvSpec, Graph, HeadBlock, model_heads, spmm


def _case(name):
    """(adj, values [E, H], h [N_src, H, C], edges) for a named case."""
    rng = np.random.default_rng(1)
    n_src, n_dst, e = {"heads": (7, 7, 25), "bipartite": (6, 4, 15),
                       "empty": (5, 5, 0)}[name]
    ei = sorted_edges(rng, n_src, n_dst, e)
    heads = 3 if name == "bipartite" else 2
    adj = Adjacency.from_edge_index(ei, size=(n_src, n_dst))
    values = jnp.asarray(rng.normal(size=(e, heads)), jnp.float32)
    h = jnp.asarray(rng.normal(size=(n_src, heads, 4)), jnp.float32)
    return adj, values, h, ei


def _value_and_grads(adj, values, h):
    probe = jnp.cos(jnp.arange(adj.num_dst * h.shape[1] * h.shape[2], dtype=jnp.float32))
    probe = probe.reshape(adj.num_dst, *h.shape[1:])
    return jax.jit(jax.value_and_grad(lambda v, x: jnp.sum(spmm(adj, v, x) * probe),
                                      argnums=(0, 1)))(values, h)


@pytest.mark.parametrize("name", ["heads", "bipartite", "empty"])
def test_built_blocks_give_the_same_product_and_gradients_bit_for_bit(name):
    adj, values, h, ei = _case(name)
    heads = values.shape[1]
    with_blocks = adj.with_heads(heads)
    assert with_blocks.heads == (heads,) and adj.heads == ()
    block = with_blocks.head_block(heads)
    n_edges = adj.num_edges
    assert [a.shape for a in block] == [(heads * adj.num_dst + 1,), (heads * n_edges,),
                                        (heads * adj.num_src + 1,), (heads * n_edges,)]
    np.testing.assert_array_equal(np.asarray(spmm(with_blocks, values, h)),
                                  np.asarray(spmm(adj, values, h)))
    for a, b in zip(jax.tree.leaves(_value_and_grads(with_blocks, values, h)),
                    jax.tree.leaves(_value_and_grads(adj, values, h))):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    np.testing.assert_allclose(np.asarray(spmm(with_blocks, values, h)),
                               np.asarray(reference(ei, values, h, adj.num_dst)), atol=1e-5)


def _int_arrays_of_size(jaxpr, size):
    """How many equations (nested ones too) make an int32 array of ``size`` elements."""
    count = 0
    for eqn in jaxpr.eqns:
        for sub in jaxprs_in_params(eqn.params):
            count += _int_arrays_of_size(sub, size)
        count += sum(1 for v in eqn.outvars if v.aval.dtype == jnp.int32
                     and int(np.prod(v.aval.shape)) == size)
    return count


def test_a_step_with_built_blocks_computes_no_block_index():
    adj, values, h, _ = _case("heads")
    heads = values.shape[1]

    def count(a):
        grads = jax.make_jaxpr(lambda v, x: jax.grad(
            lambda v, x: jnp.sum(spmm(a, v, x)), argnums=(0, 1))(v, x))(values, h)
        return _int_arrays_of_size(grads.jaxpr, heads * adj.num_edges)

    assert count(adj) >= 2  # the columns of A and of A^T, computed in the step
    assert count(adj.with_heads(heads)) == 0


def test_with_heads_skips_one_head_and_counts_it_has_and_runs_on_the_host_only():
    adj, _, _, _ = _case("heads")
    assert adj.with_heads(1) is adj and adj.with_heads() is adj
    both = adj.with_heads(4, 2, 4)
    assert both.heads == (2, 4) and both.with_heads(2) is both
    assert both.with_heads(3).heads == (2, 4, 3)
    assert both.head_block(3) is None and isinstance(both.head_block(4), HeadBlock)
    leaves, tree = jax.tree.flatten(both)
    assert len(leaves) == 4 + 2 * 4
    again = jax.tree.unflatten(tree, leaves)
    assert again.heads == (2, 4) and again.head_block(2) is not None
    with pytest.raises(ValueError, match="outside jit"):
        jax.jit(lambda a: a.with_heads(2).indptr)(adj)
    stacked = Adjacency(*(np.stack([np.asarray(x)] * 2) for x in
                          (adj.edge_index, adj.indptr, adj.perm, adj.t_indptr)),
                        num_src=adj.num_src, num_dst=adj.num_dst)
    with pytest.raises(ValueError, match="partitions"):
        stacked.with_heads(2)


def _model(kind_heads, rng):
    in_f = 5
    convs = [ConvSpec(kind, 12, {"heads": heads}) for kind, heads in kind_heads]
    return GNN(in_f, convs + [ConvSpec("gat", 3, {"heads": 1, "concat": False})],
               activation="elu", dropout=0.0, rngs=nnx.Rngs(rng))


def test_for_model_builds_the_blocks_of_every_attention_layer_and_changes_nothing():
    rng = np.random.default_rng(2)
    n, e = 9, 30
    ei = np.stack([rng.integers(0, n, e), rng.integers(0, n, e)])
    g = Graph.from_arrays(ei, rng.normal(size=(n, 5)).astype(np.float32))
    model = _model([("gat", 4), ("gatv2", 2), ("transformer", 3)], 0)
    assert model_heads(model) == (2, 3, 4)
    adj = g.adj.for_model(model)
    assert adj.heads == (2, 3, 4)
    assert g.adj.for_model(_model([("gat", 1)], 0)).heads == ()

    @nnx.jit
    def loss_and_grads(m, a):
        return nnx.value_and_grad(lambda m: jnp.sum(jnp.sin(m(g.x, a))))(m)

    for x, y in zip(jax.tree.leaves(loss_and_grads(model, adj)),
                    jax.tree.leaves(loss_and_grads(model, g.adj))):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))

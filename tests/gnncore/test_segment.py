"""Segment ops and edge utilities against plain numpy loops."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gnncore import (
    add_remaining_self_loops,
    add_self_loops,
    degree,
    gcn_norm,
    remove_self_loops,
    segment_max,
    segment_mean,
    segment_min,
    segment_reduce,
    segment_softmax,
    segment_sum,
)


def numpy_reduce(data, ids, n, how):
    out = np.zeros((n,) + data.shape[1:])
    for s in range(n):
        rows = data[ids == s]
        if len(rows):
            out[s] = {"sum": rows.sum(0), "mean": rows.mean(0), "max": rows.max(0),
                      "min": rows.min(0)}[how]
    return out


segments = st.integers(1, 8).flatmap(lambda n: st.tuples(
    st.just(n), st.lists(st.integers(0, n - 1), min_size=0, max_size=30)))


@settings(max_examples=40, deadline=None)
@given(segments, st.sampled_from(["sum", "mean", "max", "min"]), st.integers(0, 2**31 - 1))
def test_reductions_match_numpy(seg, how, seed):
    n, ids = seg
    ids = np.asarray(ids, dtype=np.int32)
    data = np.random.default_rng(seed).normal(size=(len(ids), 3)).astype(np.float32)
    out = segment_reduce(jnp.asarray(data), jnp.asarray(ids), n, how)
    np.testing.assert_allclose(np.asarray(out), numpy_reduce(data, ids, n, how),
                               atol=1e-5)
    assert np.all(np.isfinite(np.asarray(out)))


def test_empty_segments_give_zero_never_inf():
    ids = jnp.array([0, 0, 3])
    data = jnp.array([-5.0, -2.0, 7.0])
    for fn in (segment_sum, segment_mean, segment_max, segment_min):
        out = np.asarray(fn(data, ids, 5))
        assert out[1] == 0 and out[2] == 0 and out[4] == 0, fn.__name__
    assert np.asarray(segment_max(data, ids, 5))[0] == -2.0
    assert np.asarray(segment_min(data, ids, 5))[0] == -5.0
    # Integer data too: no int32 extremes leak out of empty segments.
    assert np.asarray(segment_max(jnp.array([3, 4]), jnp.array([1, 1]), 3)).tolist() == [0, 4, 0]


def test_softmax_is_max_subtracted_and_masked():
    ids = jnp.array([0, 0, 0, 2])
    logits = jnp.array([1000.0, 1001.0, 999.0, -1000.0])  # exp would overflow unshifted
    p = np.asarray(segment_softmax(logits, ids, 3))
    assert np.all(np.isfinite(p))
    e = np.exp(np.array([0.0, 1.0, -1.0]))
    np.testing.assert_allclose(p[:3], e / e.sum(), rtol=1e-6)
    assert p[3] == pytest.approx(1.0)
    masked = np.asarray(segment_softmax(logits, ids, 3, mask=jnp.array([True, False, True,
                                                                          False])))
    assert masked[1] == 0.0 and masked[3] == 0.0
    np.testing.assert_allclose(masked[[0, 2]], np.exp([0.0, -1.0]) / np.exp([0.0, -1.0]).sum(),
                               rtol=1e-6)


def test_softmax_multi_head_and_gradient_finite():
    ids = jnp.array([1, 1, 2])
    logits = jnp.array([[0.0, 3.0], [1.0, 3.0], [2.0, -4.0]])
    p = np.asarray(segment_softmax(logits, ids, 4))
    np.testing.assert_allclose(p[:2].sum(0), [1.0, 1.0], rtol=1e-6)
    g = jax.grad(lambda z: jnp.sum(segment_softmax(z, ids, 4)[:, 0] ** 2))(logits)
    assert np.all(np.isfinite(np.asarray(g)))


def test_num_segments_must_be_static():
    with pytest.raises(ValueError, match="num_segments must be a static Python int"):
        jax.jit(lambda n: segment_sum(jnp.ones(2), jnp.array([0, 1]), n))(2)
    with pytest.raises(ValueError, match="unknown aggregation"):
        segment_reduce(jnp.ones(2), jnp.array([0, 1]), 2, "median")


def test_degree_in_out_and_weighted():
    ei = jnp.array([[0, 0, 1, 2], [1, 2, 2, 2]])
    assert np.asarray(degree(ei[1], 4)).tolist() == [0, 1, 3, 0]
    assert np.asarray(degree(ei[0], 4)).tolist() == [2, 1, 1, 0]
    w = jnp.array([0.5, 1.0, 2.0, 3.0])
    assert np.asarray(degree(ei[1], 4, edge_weight=w)).tolist() == [0, 0.5, 6, 0]


def test_self_loops_are_jit_safe_with_static_shapes():
    ei = jnp.array([[0, 1, 1], [1, 1, 2]])  # node 1 already has a loop
    w = jnp.array([1.0, 5.0, 2.0])
    f = jax.jit(add_remaining_self_loops, static_argnums=1)
    idx, weight = f(ei, 3, edge_weight=w)
    assert idx.shape == (2, 6)
    assert np.asarray(idx[:, 3:]).tolist() == [[0, 1, 2], [0, 1, 2]]
    # The old loop is silenced (0) and its weight moves to the appended loop.
    assert np.asarray(weight).tolist() == [1.0, 0.0, 2.0, 1.0, 5.0, 1.0]
    idx2, w2 = jax.jit(add_self_loops, static_argnums=1)(ei, 3)
    assert idx2.shape == (2, 6) and w2 is None


def test_self_loops_scatter_no_booleans():
    # on a TPU v5e a scatter of booleans (which nodes have a loop) compiled in 6 s
    # for 10k nodes and 100k edges, a scatter-add in 0.4 s: a GCN step took 9 s
    ei = jnp.array([[0, 1, 1, 2], [1, 1, 2, 2]])
    jaxpr = jax.make_jaxpr(lambda e: add_remaining_self_loops(e, 3))(ei).jaxpr
    scatters = [eqn for eqn in jaxpr.eqns if eqn.primitive.name.startswith("scatter")]
    assert scatters and all(eqn.outvars[0].aval.dtype != jnp.bool_ for eqn in scatters), [
        (eqn.primitive.name, eqn.outvars[0].aval) for eqn in scatters]


@pytest.mark.parametrize("fill", ["mean", "add", "sum", "max", "min", 0.5])
def test_remove_then_add_self_loops_fills_like_pyg_at_a_static_shape(fill):
    """PyG's remove_self_loops + add_self_loops(fill_value=): the old loops stay,
    masked, and the new loops' features reduce each node's other in-edges."""
    ei = jnp.array([[0, 1, 1, 2, 2], [1, 1, 2, 1, 2]])  # loops on 1 and 2; node 0: none
    attr = jnp.array([[1.0, -2.0], [9.0, 9.0], [3.0, 4.0], [5.0, 0.0], [7.0, 7.0]])

    def f(ei, attr):
        ei, attr, mask = remove_self_loops(ei, attr)
        return add_self_loops(ei, 3, edge_weight=attr, fill_value=fill, edge_mask=mask)

    idx, out, mask = jax.jit(f)(ei, attr)
    assert idx.shape == (2, 8) and out.shape == (8, 2)
    assert np.asarray(mask).tolist() == [True, False, True, True, False, True, True, True]
    np.testing.assert_array_equal(out[:5], attr)  # the given edges are untouched
    # in-edges that count (loops excluded): node 0 none, node 1 rows 0 and 3, node 2 row 2
    a = np.asarray(attr)
    groups = [a[[]], a[[0, 3]], a[[2]]]
    how = {"mean": np.mean, "add": np.sum, "sum": np.sum, "max": np.max, "min": np.min}
    expected = [np.full(2, fill) if not isinstance(fill, str)
                else (how[fill](g, axis=0) if len(g) else np.zeros(2)) for g in groups]
    np.testing.assert_allclose(out[5:], np.stack(expected), rtol=1e-6)
    # without a mask the old loops take part; 1-D weights work the same way
    _, w = add_self_loops(ei, 3, edge_weight=attr[:, 0], fill_value="max")
    assert np.asarray(w[5:]).tolist() == [0.0, 9.0, 7.0]
    with pytest.raises(ValueError, match="unknown fill_value"):
        add_self_loops(ei, 3, edge_weight=attr, fill_value="mul")


def test_gcn_norm_matches_dense_and_handles_isolated_nodes():
    ei = np.array([[0, 1, 2], [1, 2, 0]])
    n = 4  # node 3 is isolated
    idx, w = gcn_norm(jnp.asarray(ei), n)
    dense = np.zeros((n, n))
    for s, t, v in zip(*np.asarray(idx), np.asarray(w)):
        dense[t, s] += v
    a_hat = np.eye(n)
    a_hat[ei[1], ei[0]] = 1
    d = a_hat.sum(1)
    np.testing.assert_allclose(dense, a_hat / np.sqrt(np.outer(d, d)), atol=1e-6)
    # Without self loops an isolated node has degree 0: coefficient 0, no NaN/Inf.
    idx, w = gcn_norm(jnp.asarray(ei), n, add_self_loops=False)
    assert np.all(np.isfinite(np.asarray(w)))
    _, w = gcn_norm(jnp.zeros((2, 0), jnp.int32), 2, add_self_loops=False)
    assert w.shape == (0,)

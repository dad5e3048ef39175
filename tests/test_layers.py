"""Layer behaviour beyond the maths: caches, attention outputs, dropout streams,
running statistics, option validation and model assembly."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from zoo import sample_inputs

from gnncore import (
    GAT,
    GCN,
    GNN,
    BatchNorm,
    ConvSpec,
    GATConv,
    GCNConv,
    GINConv,
    SAGEConv,
    build_conv,
)


def test_gcn_cache_must_be_filled_eagerly_and_match_node_count():
    x, ei, _, _ = sample_inputs()
    layer = GCNConv(5, 4, cached=True, rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match="empty cache: call layer.precompute_norm"):
        layer(x, ei)
    with pytest.raises(ValueError, match="must run eagerly"):
        nnx.jit(lambda m, e: m.precompute_norm(e, 7))(layer, ei)
    layer.precompute_norm(ei, x.shape[0])
    plain = GCNConv(5, 4, rngs=nnx.Rngs(0))
    np.testing.assert_allclose(np.asarray(nnx.jit(lambda m, a, e: m(a, e))(layer, x, ei)),
                               np.asarray(plain(x, ei)), atol=1e-6)
    # The cached layer ignores the edge_index it is given: that is the point.
    assert np.allclose(np.asarray(layer(x, ei[:, :2])), np.asarray(plain(x, ei)), atol=1e-6)
    with pytest.raises(ValueError, match="computed for 7 nodes but x has 6"):
        layer(x[:6], ei)


def test_gcn_rejects_self_loops_without_normalisation():
    with pytest.raises(ValueError, match="add_self_loops=True needs normalize=True"):
        GCNConv(3, 3, normalize=False, add_self_loops=True, rngs=nnx.Rngs(0))


def test_gat_attention_weights_are_a_softmax_per_target():
    x, ei, _, _ = sample_inputs()
    layer = GATConv(5, 3, heads=2, rngs=nnx.Rngs(0))
    out, (index, alpha) = layer(x, ei, return_attention_weights=True)
    assert out.shape == (7, 6) and alpha.shape == (ei.shape[1] + 7, 2)
    sums = jax.ops.segment_sum(alpha, index[1], 7)
    np.testing.assert_allclose(np.asarray(sums), 1.0, rtol=1e-5)  # isolated node: its loop
    old_loop = np.flatnonzero(np.asarray(ei[0] == ei[1]))
    assert old_loop.size and np.all(np.asarray(alpha)[old_loop] == 0)


def test_gat_attention_dropout_uses_its_own_stream():
    x, ei, _, _ = sample_inputs()
    layer = GATConv(5, 3, heads=2, dropout=0.5, rngs=nnx.Rngs(params=0, dropout=1))
    layer.train()
    a = layer(x, ei, return_attention_weights=True)[1][1]
    b = layer(x, ei, return_attention_weights=True)[1][1]
    assert not np.array_equal(np.asarray(a), np.asarray(b))  # a new mask each call
    assert np.any(np.asarray(a) == 0)
    layer.eval()
    c = layer(x, ei, return_attention_weights=True)[1][1]
    d = layer(x, ei, return_attention_weights=True)[1][1]
    np.testing.assert_array_equal(np.asarray(c), np.asarray(d))
    streams = [p for p, _ in nnx.to_flat_state(nnx.state(layer, nnx.RngState))]
    assert streams and all(p[0] == "dropout" for p in streams)


def test_gat_edge_dim_requires_edge_attr_and_bipartite_needs_targets():
    x, ei, _, ea = sample_inputs()
    layer = GATConv(5, 3, edge_dim=3, rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match="pass edge_attr"):
        layer(x, ei)
    bip = GATConv((5, 2), 3, add_self_loops=False, rngs=nnx.Rngs(0))
    out = bip((x, jnp.ones((4, 2))), jnp.array([[0, 6], [3, 3]]))
    assert out.shape == (4, 3)
    with pytest.raises(ValueError, match="bipartite"):
        bip(x, ei)
    with pytest.raises(ValueError, match="add_self_loops=False"):
        GATConv((5, 2), 3, rngs=nnx.Rngs(0))((x, jnp.ones((4, 2))), ei)


def test_sage_bipartite_and_gin_eps_parameter():
    x, ei, _, _ = sample_inputs()
    sage = SAGEConv((5, 2), 3, rngs=nnx.Rngs(0))
    assert sage((x, jnp.ones((4, 2))), jnp.array([[0, 6], [3, 3]])).shape == (4, 3)
    gin = GINConv(5, 4, train_eps=True, eps=0.25, rngs=nnx.Rngs(0))
    eps = nnx.state(gin, nnx.Param)["eps"]
    assert float(eps[...]) == 0.25
    fixed = GINConv(5, 4, eps=0.25, rngs=nnx.Rngs(0))
    assert "eps" not in nnx.state(fixed, nnx.Param)
    np.testing.assert_allclose(np.asarray(gin(x, ei)), np.asarray(fixed(x, ei)), atol=1e-6)


def test_batch_norm_running_stats_move_only_in_train_mode():
    x = jnp.asarray(np.random.default_rng(0).normal(2.0, 3.0, size=(50, 4)), jnp.float32)
    bn = BatchNorm(4)
    assert isinstance(nnx.state(bn, nnx.BatchStat)["mean"], nnx.BatchStat)
    out = bn(x)
    np.testing.assert_allclose(np.asarray(out.mean(0)), 0.0, atol=1e-5)
    mean_after = np.asarray(bn.mean[...])
    np.testing.assert_allclose(mean_after, 0.1 * np.asarray(x.mean(0)), rtol=1e-5)
    bn.eval()
    bn(x)
    np.testing.assert_array_equal(np.asarray(bn.mean[...]), mean_after)
    with pytest.raises(ValueError, match="more than one node"):
        BatchNorm(4)(x[:1])
    # A mask restricts the statistics to real nodes (padding-safe).
    bn2 = BatchNorm(4)
    padded = jnp.concatenate([x, jnp.full((10, 4), 1e3)])
    mask = jnp.arange(60) < 50
    np.testing.assert_allclose(np.asarray(bn2(padded, mask=mask))[:50],
                               np.asarray(BatchNorm(4)(x)), atol=1e-4)


def test_gnn_validation_errors():
    r = nnx.Rngs(0)
    with pytest.raises(ValueError, match="at least one conv"):
        GNN(3, [], rngs=r)
    with pytest.raises(ValueError, match="unknown conv kind 'dense'"):
        ConvSpec("dense", 4)
    with pytest.raises(ValueError, match="unknown activation"):
        GNN(3, [ConvSpec("gcn", 2)], activation="swishy", rngs=r)
    with pytest.raises(ValueError, match="head=True needs out_features"):
        GNN(3, [ConvSpec("gcn", 2)], head=True, rngs=r)
    with pytest.raises(ValueError, match="not divisible by heads=3"):
        build_conv(ConvSpec("gat", 8, {"heads": 3}), 3, rngs=r)
    with pytest.raises(ValueError, match="last conv outputs 2 features but out_features=3"):
        GNN(3, [ConvSpec("gcn", 2)], out_features=3, rngs=r)


def test_gnn_hidden_outputs_widths_and_head():
    x, ei, ew, ea = sample_inputs()
    model = GNN(5, [ConvSpec("gcn", 8), ConvSpec("gat", 6, {"heads": 2, "edge_dim": 3}),
                    ConvSpec("sage", 4)], out_features=3, head=True, rngs=nnx.Rngs(0))
    logits, hidden = model(x, ei, ew, ea, return_hidden=True)
    assert logits.shape == (7, 3)
    assert [h.shape for h in hidden] == [(7, 8), (7, 6), (7, 4)]
    assert model.widths == (5, 8, 6, 4)
    gat = GAT(5, 8, 3, heads=4, rngs=nnx.Rngs(0))
    assert gat.convs[0].heads == 4 and gat.convs[0].out_features == 2
    assert gat.convs[1].concat is False and gat(x, ei).shape == (7, 3)
    gcn = GCN(5, 16, 3, num_layers=3, rngs=nnx.Rngs(0))
    assert gcn.widths == (5, 16, 16, 3)


def test_residual_connection_adds_the_block_input():
    x, ei, _, _ = sample_inputs()
    specs = [ConvSpec("gcn", 5), ConvSpec("gcn", 2)]
    with_res = GNN(5, specs, residual=True, activation="identity", rngs=nnx.Rngs(0))
    without = GNN(5, specs, residual=False, activation="identity", rngs=nnx.Rngs(0))
    h_res = with_res(x, ei, return_hidden=True)[1][0]
    h_plain = without(x, ei, return_hidden=True)[1][0]
    np.testing.assert_allclose(np.asarray(h_res), np.asarray(h_plain + x), atol=1e-6)


def test_gat_bipartite_self_loops_use_source_features_on_the_fused_path():
    # regression: the fused (Adjacency) path added the *target* features for the
    # appended self-loops; a loop i -> i carries the source node's features.
    from gnncore import GATConv, Graph

    rng = np.random.default_rng(0)
    x_src = jnp.asarray(rng.normal(size=(4, 3)), jnp.float32)
    x_dst = jnp.asarray(rng.normal(size=(4, 3)), jnp.float32)
    g = Graph.from_arrays(np.array([[0, 1, 2, 3], [1, 2, 3, 0]]), np.zeros((4, 1)))
    conv = GATConv(3, 2, heads=2, rngs=nnx.Rngs(0))
    by_list = conv((x_src, x_dst), g.edge_index)
    fused = conv((x_src, x_dst), g.adj)
    np.testing.assert_allclose(fused, by_list, rtol=1e-5, atol=1e-6)

"""Layer behaviour beyond the maths: caches, attention outputs, dropout streams,
running statistics, option validation and model assembly."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from jax.extend.core import jaxprs_in_params
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


def _products_over(jaxpr, width):
    """The matrix products in ``jaxpr`` (nested ones included) that contract a
    dimension of size ``width``."""
    found = 0
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "dot_general":
            (lhs_contract, _), _ = eqn.params["dimension_numbers"]
            lhs = eqn.invars[0].aval.shape
            found += any(lhs[d] == width for d in lhs_contract)
        for sub in jaxprs_in_params(eqn.params):
            found += _products_over(sub, width)
    return found


@pytest.mark.parametrize("bipartite", [False, True])
def test_gat_multiplies_its_input_features_once(bipartite):
    """The attention logits come from the layer's output (``h @ A``), so a wide
    input is multiplied once, by the weights, forward and backward: with the
    attention vectors folded into the input weights, a second product over all
    input features made the step 0.8x PyG's on Cora's 1433 dense features."""
    wide = 37  # no other size in the layer is 37
    x, ei, _, _ = sample_inputs()
    x = jnp.tile(x, (1, 8))[:, :wide]
    layer = GATConv((wide, wide) if bipartite else wide, 3, heads=2, rngs=nnx.Rngs(0))
    graphdef, params = nnx.split(layer)
    inputs = (x, x) if bipartite else x

    def loss(params):
        return jnp.sum(nnx.merge(graphdef, params)(inputs, ei) ** 2)

    forward = jax.make_jaxpr(loss)(params).jaxpr
    both = jax.make_jaxpr(jax.grad(loss))(params).jaxpr
    per_input = 2 if bipartite else 1  # x_src @ W_src and x_dst @ W_dst
    assert _products_over(forward, wide) == per_input
    # backward: the weights' gradient x.T @ g contracts over nodes, not features;
    # nothing but the forward product contracts over the input width
    assert _products_over(both, wide) == per_input


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


# ----------------------------------------------------- one owner for every rule
def test_conv_types_map_kinds_to_classes_that_declare_what_they_take():
    import gnncore
    from gnncore import CONV_TYPES

    assert all(isinstance(cls, type) for cls in CONV_TYPES.values())
    headed = {k for k, cls in CONV_TYPES.items() if cls.has_heads}
    weighted = {k for k, cls in CONV_TYPES.items() if cls.takes_edge_weight}
    with_attr = {k for k, cls in CONV_TYPES.items() if cls.takes_edge_attr}
    assert headed == {"gat", "gatv2", "transformer"}
    assert weighted == {"gcn", "graph", "cheb", "sg"}
    assert with_attr == {"gat", "gatv2", "transformer"}
    for name in ("HEADED", "WEIGHTED", "EDGE_FEATURES"):
        assert not hasattr(gnncore.models, name)
    assert gnncore.POOLS == ("mean", "sum", "max", "min")
    assert tuple(gnncore.NORMS) == ("batch", "layer", "graph")


def test_build_conv_reads_the_spec_defaults_of_the_conv_class():
    from gnncore import CONV_TYPES, ChebConv

    assert CONV_TYPES["cheb"] is ChebConv and dict(ChebConv.spec_defaults) == {"K": 2}
    r = nnx.Rngs(0)
    assert build_conv(ConvSpec("cheb", 4), 3, rngs=r).K == 2
    assert build_conv(ConvSpec("cheb", 4, {"K": 3}), 3, rngs=r).K == 3
    assert dict(GCNConv.spec_defaults) == {}


def test_model_families_are_gnn_subclasses_declaring_their_conv():
    from gnncore import GIN, BasicGNN, GATv2Conv, GraphSAGE

    r = nnx.Rngs(0)
    for cls, kind, conv in ((GCN, "gcn", GCNConv), (GAT, "gat", GATConv),
                            (GraphSAGE, "sage", SAGEConv), (GIN, "gin", GINConv)):
        assert issubclass(cls, BasicGNN) and issubclass(cls, GNN)
        assert cls.conv_kind == kind and cls.conv_class is conv
        assert cls.has_heads == conv.has_heads
        assert cls.takes_edge_weight == conv.takes_edge_weight
        assert cls.takes_edge_attr == conv.takes_edge_attr
        model = cls(5, 8, 3, rngs=r)
        assert isinstance(model, GNN) and model.kinds == (kind, kind)
    assert GAT.has_heads and not GCN.has_heads and GCN.takes_edge_weight
    with pytest.raises(TypeError, match="base class"):
        BasicGNN(5, 8, 3, rngs=r)

    class GATv2(BasicGNN):
        conv_kind = "gatv2"

    assert GATv2.conv_class is GATv2Conv and GATv2.has_heads
    model = GATv2(5, 8, 3, heads=2, rngs=r)
    assert model.convs[-1].concat is False  # a headed output layer averages its heads


def test_norm_is_one_argument():
    from gnncore import NORMS, LayerNorm

    r = nnx.Rngs(0)
    specs = [ConvSpec("gcn", 4), ConvSpec("gcn", 2)]
    assert len(GNN(3, specs, rngs=r).norms) == 0  # default: no norm
    assert isinstance(GNN(3, specs, norm="layer", rngs=r).norms[0], LayerNorm)
    assert isinstance(GCN(3, 4, 2, norm="batch", rngs=r).norms[0], NORMS["batch"])
    with pytest.raises(TypeError, match="batch_norm"):
        GNN(3, specs, batch_norm=True, rngs=r)
    with pytest.raises(ValueError, match="unknown norm"):
        GNN(3, specs, norm="group", rngs=r)


@pytest.mark.parametrize("pool", ["mean", "sum", "max", "min"])
def test_gnn_readout_is_the_global_pool(pool):
    from gnncore import global_add_pool, global_max_pool, global_mean_pool, global_min_pool

    fn = {"mean": global_mean_pool, "sum": global_add_pool, "max": global_max_pool,
          "min": global_min_pool}[pool]
    x, ei, ew, ea = sample_inputs()
    model = GNN(5, [ConvSpec("gcn", 4), ConvSpec("sage", 4)], out_features=2, head=True,
                pool=pool, rngs=nnx.Rngs(0))
    batch = jnp.array([0, 0, 0, 1, 1, 2, 2], jnp.int32)
    out, hidden = model(x, ei, ew, batch=batch, num_graphs=4, return_hidden=True)
    np.testing.assert_allclose(out, model.head(fn(hidden[-1], batch, 4)), rtol=1e-6)
    mask = jnp.arange(7) < 5
    out, hidden = model(x, ei, ew, node_mask=mask, return_hidden=True)
    np.testing.assert_allclose(out, model.head(fn(hidden[-1], mask=mask)), rtol=1e-6)


@pytest.mark.parametrize("shape", [(7, 3), (1, 4, 5), (33, 16), (2, 1), (5,), (0,)])
def test_initialisers_give_the_plain_jax_values_bit_for_bit(shape):
    """gnncore's initialisers compile one cheap program per shape (gnncore/inits.py)
    and must still give exactly what the plain JAX/Flax initialisers give."""
    from conftest import lowerings

    from gnncore import inits

    key = jax.random.key(3)
    fan_in = shape[-2] if len(shape) > 1 else shape[0]
    bound = 1.0 / max(fan_in, 1) ** 0.5
    plain = {
        "glorot": nnx.initializers.glorot_uniform(),
        "torch_kernel": nnx.initializers.variance_scaling(1.0 / 3.0, "fan_in", "uniform"),
        "torch_bias": lambda k, s, d: jax.random.uniform(k, s, d, -bound, bound),
        "zeros": nnx.initializers.zeros_init(),
    }
    ours = {"glorot": inits.glorot, "torch_kernel": inits.torch_kernel,
            "torch_bias": inits.torch_bias(fan_in), "zeros": inits.zeros}
    for name, init in ours.items():
        if name != "torch_bias" and len(shape) < 2:
            continue  # fan-based initialisers need two axes
        got = init(key, shape, jnp.float32)
        want = plain[name](key, shape, jnp.float32)
        assert got.shape == want.shape and got.dtype == want.dtype, name
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want), err_msg=name)
        # a second call of the same shape compiles nothing; zeros never do
        assert lowerings(lambda init=init: init(key, shape, jnp.float32)) == 0, name
    # under a trace (a model built inside jit / eval_shape) they still work
    traced = jax.jit(lambda k: inits.glorot(k, (4, 6)) + inits.zeros(k, (4, 6)))(key)
    np.testing.assert_array_equal(np.asarray(traced),
                                  np.asarray(plain["glorot"](key, (4, 6), jnp.float32)))
    assert jax.eval_shape(lambda k: inits.torch_bias(6)(k, (6,)), key).shape == (6,)


def test_a_model_built_inside_jit_with_a_closed_over_key_gets_the_eager_weights():
    """A nested jit takes no compiler options: an initialiser called under an outer
    trace with a concrete key falls back to the plain initialiser, same values."""
    from gnncore import inits

    key = jax.random.key(5)
    inside = jax.jit(lambda: inits.torch_kernel(key, (3, 4)) + inits.torch_bias(3)(key, (4,)))()
    outside = inits.torch_kernel(key, (3, 4)) + inits.torch_bias(3)(key, (4,))
    np.testing.assert_array_equal(np.asarray(inside), np.asarray(outside))

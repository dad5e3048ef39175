"""Every layer and model configuration the generic tests (jit, gradients) run.

Each entry builds a fresh module and says how to call it on (x, edge_index,
edge_weight, edge_attr).
"""

import jax.numpy as jnp
import numpy as np
from flax import nnx

from gnncore import (
    GAT,
    GCN,
    GIN,
    GNN,
    MLP,
    BatchNorm,
    ChebConv,
    ConvSpec,
    EdgeConv,
    GATConv,
    GATv2Conv,
    GCNConv,
    GINConv,
    GINEConv,
    GraphConv,
    GraphNorm,
    GraphSAGE,
    LayerNorm,
    SAGEConv,
    SGConv,
    TransformerConv,
)

F_IN, EDGE_DIM, N_CLASSES = 5, 3, 4


def _call_plain(m, x, ei, ew, ea):
    return m(x, ei)


def _call_weighted(m, x, ei, ew, ea):
    return m(x, ei, ew)


def _call_edge_attr(m, x, ei, ew, ea):
    return m(x, ei, ea)


def _call_norm(m, x, ei, ew, ea):
    return m(x)


def _call_model(m, x, ei, ew, ea):
    return m(x, ei, ew, ea)


def _cached_gcn(rngs):
    layer = GCNConv(F_IN, 6, cached=True, rngs=rngs)
    ei, _ = sample_inputs()[1:3]
    layer.precompute_norm(ei, sample_inputs()[0].shape[0])
    return layer


LAYERS = {
    "gcn": (lambda r: GCNConv(F_IN, 6, rngs=r), _call_plain),
    "gcn_weighted_improved": (lambda r: GCNConv(F_IN, 6, improved=True, rngs=r),
                              _call_weighted),
    "gcn_raw": (lambda r: GCNConv(F_IN, 6, normalize=False, rngs=r), _call_weighted),
    "gcn_cached": (_cached_gcn, _call_plain),
    "gat": (lambda r: GATConv(F_IN, 3, heads=2, rngs=r), _call_plain),
    "gat_mean_heads": (lambda r: GATConv(F_IN, 3, heads=3, concat=False, rngs=r),
                       _call_plain),
    "gat_edge_dim": (lambda r: GATConv(F_IN, 3, heads=2, edge_dim=EDGE_DIM, rngs=r),
                     _call_edge_attr),
    "gat_dropout": (lambda r: GATConv(F_IN, 3, heads=2, dropout=0.5, rngs=r), _call_plain),
    "sage_mean": (lambda r: SAGEConv(F_IN, 6, rngs=r), _call_plain),
    "sage_max_normalize": (lambda r: SAGEConv(F_IN, 6, aggr="max", normalize=True, rngs=r),
                           _call_plain),
    "sage_sum_project": (lambda r: SAGEConv(F_IN, 3, aggr="sum", project=True, rngs=r),
                         _call_plain),
    "gin": (lambda r: GINConv(F_IN, 6, rngs=r), _call_plain),
    "gin_train_eps": (lambda r: GINConv(F_IN, 6, train_eps=True, eps=0.1, rngs=r),
                      _call_plain),
    "batch_norm": (lambda r: BatchNorm(F_IN, rngs=r), _call_norm),
    "gatv2": (lambda r: GATv2Conv(F_IN, 3, heads=2, rngs=r), _call_plain),
    "gatv2_shared_edge_dim": (lambda r: GATv2Conv(F_IN, 3, heads=2, share_weights=True,
                                                  edge_dim=EDGE_DIM, rngs=r), _call_edge_attr),
    "transformer": (lambda r: TransformerConv(F_IN, 3, heads=2, rngs=r), _call_plain),
    "transformer_beta_edge_dim": (lambda r: TransformerConv(F_IN, 3, heads=2, beta=True,
                                                            edge_dim=EDGE_DIM, rngs=r),
                                  _call_edge_attr),
    "gine": (lambda r: GINEConv(F_IN, 6, edge_dim=EDGE_DIM, train_eps=True, rngs=r),
             _call_edge_attr),
    "graph_conv_mean": (lambda r: GraphConv(F_IN, 6, aggr="mean", rngs=r), _call_weighted),
    "edge_conv": (lambda r: EdgeConv(MLP([2 * F_IN, 8, 6], rngs=r)), _call_plain),
    "cheb_k3_rw": (lambda r: ChebConv(F_IN, 6, 3, normalization="rw", rngs=r), _call_weighted),
    "sg_k2": (lambda r: SGConv(F_IN, 6, K=2, rngs=r), _call_weighted),
    "layer_norm_node": (lambda r: LayerNorm(F_IN, mode="node", rngs=r), _call_norm),
    "graph_norm": (lambda r: GraphNorm(F_IN, rngs=r), _call_norm),
}

MODELS = {
    "gcn": (lambda r: GCN(F_IN, 8, N_CLASSES, rngs=r), _call_model),
    "gat": (lambda r: GAT(F_IN, 8, N_CLASSES, heads=2, rngs=r), _call_model),
    "sage": (lambda r: GraphSAGE(F_IN, 8, N_CLASSES, rngs=r), _call_model),
    "gin": (lambda r: GIN(F_IN, 8, N_CLASSES, rngs=r), _call_model),
    "mixed_bn_residual_head": (
        lambda r: GNN(F_IN, [ConvSpec("gcn", 8), ConvSpec("gat", 8, {"heads": 2}),
                             ConvSpec("sage", 8, {"aggr": "max"}), ConvSpec("gin", 8)],
                      out_features=N_CLASSES, head=True, norm="batch", residual=True,
                      dropout=0.3, activation="elu", rngs=r),
        _call_model),
    "gatv2_transformer_graph_head": (
        lambda r: GNN(F_IN, [ConvSpec("gatv2", 8, {"heads": 2}),
                             ConvSpec("transformer", 8, {"heads": 2}), ConvSpec("graph", 8),
                             ConvSpec("cheb", 8, {"K": 2}), ConvSpec("sg", 8)],
                      out_features=N_CLASSES, head=True, rngs=r),
        _call_model),
    "gcn_bn_three_layers": (lambda r: GCN(F_IN, 8, N_CLASSES, num_layers=3, norm="batch",
                                          rngs=r), _call_model),
}


def sample_inputs(seed=0):
    """A 7-node graph with an isolated node (6), a self loop and a duplicate edge."""
    rng = np.random.default_rng(seed)
    ei = np.array([[0, 1, 2, 3, 4, 4, 1, 5, 0],
                   [1, 2, 3, 4, 0, 4, 2, 0, 5]])
    x = rng.normal(size=(7, F_IN)).astype(np.float32)
    ew = rng.uniform(0.5, 2.0, size=ei.shape[1]).astype(np.float32)
    ea = rng.normal(size=(ei.shape[1], EDGE_DIM)).astype(np.float32)
    return jnp.asarray(x), jnp.asarray(ei, jnp.int32), jnp.asarray(ew), jnp.asarray(ea)


def build(entry, seed=0):
    make, call = entry
    return make(nnx.Rngs(params=seed, dropout=seed + 1)), call

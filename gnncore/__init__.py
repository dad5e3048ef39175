"""gnncore: a small, jit-friendly Flax NNX message-passing library.

Everything a GNN needs with static shapes: a :class:`Graph` pytree, segment
reductions, one :class:`MessagePassing` mechanism, PyG-compatible conv layers,
:class:`BatchNorm` and model stacks. Imports jax, flax and numpy only.
"""

# first: asks for XLA's CPU flags before anything can start the backend
from gnncore import xla  # noqa: F401, I001  (must stay the first import)

from gnncore.aggr import (
    Aggregation,
    MaxAggregation,
    MeanAggregation,
    MinAggregation,
    MultiAggregation,
    SoftmaxAggregation,
    StdAggregation,
    SumAggregation,
    VarAggregation,
)
from gnncore.batch import Batch
from gnncore.conv import (
    APPNP,
    ChebConv,
    EdgeConv,
    GATConv,
    GATv2Conv,
    GCNConv,
    GINConv,
    GINEConv,
    GraphConv,
    SAGEConv,
    SGConv,
    TransformerConv,
)
from gnncore.graph import Graph, bucket_size, from_networkx, to_networkx
from gnncore.message_passing import MessagePassing
from gnncore.mlp import MLP
from gnncore.models import (
    ACTIVATIONS,
    CONV_TYPES,
    GAT,
    GCN,
    GIN,
    GNN,
    NORMS,
    POOLS,
    BasicGNN,
    ConvSpec,
    GraphSAGE,
    build_conv,
)
from gnncore.norm import BatchNorm, GraphNorm, LayerNorm
from gnncore.pool import (
    PoolOutput,
    SAGPooling,
    TopKPooling,
    global_add_pool,
    global_max_pool,
    global_mean_pool,
    global_min_pool,
)
from gnncore.segment import (
    segment_max,
    segment_mean,
    segment_min,
    segment_reduce,
    segment_softmax,
    segment_std,
    segment_sum,
    segment_var,
)
from gnncore.sparse import (
    Adjacency,
    DenseFeatures,
    SparseFeatures,
    sparse_if_mostly_zero,
    spmm,
)
from gnncore.utils import (
    add_remaining_self_loops,
    add_self_loops,
    as_edge_index,
    coalesce,
    degree,
    gcn_norm,
    is_self_loop,
    remove_self_loops,
    to_device,
    to_undirected,
)

__version__ = "0.1.0"

__all__ = [
    "ACTIVATIONS", "add_remaining_self_loops", "add_self_loops", "Adjacency", "Aggregation",
    "APPNP", "as_edge_index", "BasicGNN", "Batch", "BatchNorm", "bucket_size", "build_conv",
    "ChebConv", "coalesce", "CONV_TYPES", "ConvSpec", "degree", "DenseFeatures", "EdgeConv",
    "from_networkx",
    "GAT", "GATConv", "GATv2Conv", "GCN", "gcn_norm", "GCNConv", "GIN", "GINConv", "GINEConv",
    "global_add_pool", "global_max_pool", "global_mean_pool", "global_min_pool", "GNN",
    "Graph", "GraphConv", "GraphNorm", "GraphSAGE", "is_self_loop", "LayerNorm",
    "MaxAggregation", "MeanAggregation", "MessagePassing", "MinAggregation", "MLP",
    "MultiAggregation", "NORMS", "PoolOutput", "POOLS", "remove_self_loops", "SAGEConv",
    "SAGPooling", "segment_max", "segment_mean", "segment_min", "segment_reduce",
    "segment_softmax", "segment_std", "segment_sum", "segment_var", "SGConv",
    "SoftmaxAggregation", "SparseFeatures", "sparse_if_mostly_zero", "spmm", "StdAggregation",
    "SumAggregation", "to_device", "to_networkx", "to_undirected", "TopKPooling", "TransformerConv",
    "VarAggregation"
]

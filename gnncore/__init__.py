"""gnncore: a small, jit-friendly Flax NNX message-passing library.

Everything a GNN needs with static shapes: a :class:`Graph` pytree, segment
reductions, one :class:`MessagePassing` mechanism, PyG-compatible conv layers,
:class:`BatchNorm` and model stacks. Imports jax, flax and numpy only.
"""

from gnncore.batch import Batch
from gnncore.conv import (
    MLP,
    EdgeConv,
    GATConv,
    GCNConv,
    GINConv,
    GINEConv,
    GraphConv,
    SAGEConv,
)
from gnncore.graph import Graph, bucket_size, from_networkx, to_networkx
from gnncore.message_passing import MessagePassing
from gnncore.models import (
    ACTIVATIONS,
    CONV_TYPES,
    GAT,
    GCN,
    GIN,
    GNN,
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
    segment_sum,
)
from gnncore.sparse import Adjacency, SparseFeatures, spmm
from gnncore.utils import (
    add_remaining_self_loops,
    add_self_loops,
    as_edge_index,
    coalesce,
    degree,
    gcn_norm,
    is_self_loop,
    to_undirected,
)

__version__ = "0.1.0"

__all__ = [
    "ACTIVATIONS", "Adjacency", "Batch", "BatchNorm", "CONV_TYPES", "ConvSpec", "EdgeConv",
    "GAT", "GATConv", "GCN", "GCNConv", "GIN", "GINConv", "GINEConv", "GNN", "Graph",
    "GraphConv", "GraphNorm", "GraphSAGE", "LayerNorm", "MLP", "MessagePassing",
    "PoolOutput", "SAGEConv", "SAGPooling", "SparseFeatures", "TopKPooling",
    "add_remaining_self_loops", "add_self_loops", "as_edge_index", "bucket_size",
    "build_conv", "coalesce", "degree", "from_networkx", "gcn_norm", "global_add_pool",
    "global_max_pool", "global_mean_pool", "global_min_pool", "is_self_loop",
    "segment_max", "segment_mean", "segment_min", "segment_reduce", "segment_softmax",
    "segment_sum", "spmm", "to_networkx", "to_undirected",
]

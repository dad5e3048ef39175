"""gnncore: a small, jit-friendly Flax NNX message-passing library.

Everything a GNN needs with static shapes: a :class:`Graph` pytree, segment
reductions, one :class:`MessagePassing` mechanism, PyG-compatible conv layers,
:class:`BatchNorm` and model stacks. Imports jax, flax and numpy only.
"""

from gnncore.conv import MLP, GATConv, GCNConv, GINConv, SAGEConv
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
from gnncore.norm import BatchNorm
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
    degree,
    gcn_norm,
    is_self_loop,
)

__version__ = "0.1.0"

__all__ = [
    "ACTIVATIONS", "Adjacency", "BatchNorm", "CONV_TYPES", "ConvSpec", "GAT", "GATConv",
    "GCN", "GCNConv", "GIN", "GINConv", "GNN", "Graph", "GraphSAGE", "MLP",
    "MessagePassing", "SAGEConv", "SparseFeatures", "add_remaining_self_loops",
    "add_self_loops", "as_edge_index", "bucket_size", "build_conv", "degree",
    "from_networkx", "gcn_norm", "is_self_loop", "segment_max", "segment_mean",
    "segment_min", "segment_reduce", "segment_softmax", "segment_sum", "spmm",
    "to_networkx",
]

"""Convolution layers, one per file."""

from gnncore.conv.appnp import APPNP
from gnncore.conv.cheb import ChebConv
from gnncore.conv.edge_conv import EdgeConv
from gnncore.conv.gat import GATConv
from gnncore.conv.gatv2 import GATv2Conv
from gnncore.conv.gcn import GCNConv
from gnncore.conv.gin import GINConv
from gnncore.conv.gine import GINEConv
from gnncore.conv.graph_conv import GraphConv
from gnncore.conv.sage import SAGEConv
from gnncore.conv.sg import SGConv
from gnncore.conv.transformer import TransformerConv
from gnncore.mlp import MLP  # re-exported: GIN's default network

__all__ = [
    "APPNP", "ChebConv", "EdgeConv", "GATConv", "GATv2Conv", "GCNConv", "GINConv", "GINEConv",
    "GraphConv", "MLP", "SAGEConv", "SGConv", "TransformerConv"
]

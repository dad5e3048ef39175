"""Convolution layers, one per file."""

from gnncore.conv.edge_conv import EdgeConv
from gnncore.conv.gat import GATConv
from gnncore.conv.gcn import GCNConv
from gnncore.conv.gin import MLP, GINConv
from gnncore.conv.gine import GINEConv
from gnncore.conv.graph_conv import GraphConv
from gnncore.conv.sage import SAGEConv

__all__ = ["EdgeConv", "GATConv", "GCNConv", "GINConv", "GINEConv", "GraphConv", "MLP",
           "SAGEConv"]

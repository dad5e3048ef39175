"""Convolution layers, one per file."""

from gnncore.conv.gat import GATConv
from gnncore.conv.gcn import GCNConv
from gnncore.conv.gin import MLP, GINConv
from gnncore.conv.sage import SAGEConv

__all__ = ["GATConv", "GCNConv", "GINConv", "MLP", "SAGEConv"]

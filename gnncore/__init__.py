"""gnncore: a small, jit-friendly Flax NNX message-passing library.

Everything a GNN needs with static shapes: a :class:`Graph` pytree, segment
reductions, one :class:`MessagePassing` mechanism, PyG-compatible conv layers,
:class:`BatchNorm` and model stacks. Imports jax, flax and numpy only.

``import gnncore`` itself imports neither JAX nor Flax: each name is imported
from its module on first use (``gnncore.Graph`` imports :mod:`gnncore.graph`),
and the name tables (``CONV_TYPES``, ``NORMS``, ``ACTIVATIONS``, ``POOLS``) are
readable before that (:mod:`gnncore.registry`). A program can then check a
configuration, or draw a page, before it pays for JAX.
"""

from __future__ import annotations

import importlib

# first: asks for XLA's CPU flags before anything can start the backend (without
# importing JAX itself)
from gnncore import xla  # noqa: F401, I001  (must stay the first import)
from gnncore.registry import ACTIVATIONS, CONV_TYPES, NORMS, POOLS  # noqa: F401

#: module -> the public names it defines, each imported on first use
_MODULES = {
    "gnncore.aggr": (
        "Aggregation", "MaxAggregation", "MeanAggregation", "MinAggregation", "MultiAggregation",
        "SoftmaxAggregation", "StdAggregation", "SumAggregation", "VarAggregation",
    ),
    "gnncore.batch": ("Batch",),
    "gnncore.conv": (
        "APPNP", "ChebConv", "EdgeConv", "GATConv", "GATv2Conv", "GCNConv", "GINConv", "GINEConv",
        "GraphConv", "SAGEConv", "SGConv", "TransformerConv",
    ),
    "gnncore.graph": ("Graph", "bucket_size", "from_networkx", "to_networkx"),
    "gnncore.message_passing": ("MessagePassing",),
    "gnncore.mlp": ("MLP",),
    "gnncore.models": (
        "GAT", "GCN", "GIN", "GNN", "BasicGNN", "ConvSpec", "GraphSAGE", "build_conv",
    ),
    "gnncore.norm": ("BatchNorm", "GraphNorm", "LayerNorm"),
    "gnncore.pool": (
        "PoolOutput", "SAGPooling", "TopKPooling", "global_add_pool", "global_max_pool",
        "global_mean_pool", "global_min_pool",
    ),
    "gnncore.segment": (
        "segment_max", "segment_mean", "segment_min", "segment_reduce", "segment_softmax",
        "segment_std", "segment_sum", "segment_var",
    ),
    "gnncore.sparse": (
        "Adjacency", "DenseFeatures", "HeadBlock", "SparseFeatures", "model_heads",
        "sparse_if_mostly_zero", "spmm",
    ),
    "gnncore.utils": (
        "add_remaining_self_loops", "add_self_loops", "as_edge_index", "coalesce", "degree",
        "gcn_norm", "is_self_loop", "remove_self_loops", "to_device", "to_undirected",
    ),
}
_WHERE = {name: module for module, names in _MODULES.items() for name in names}


def __getattr__(name: str):
    """Import a public name's module on first use (PEP 562), and keep the
    name here, so the next use is a plain attribute."""
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'gnncore' has no attribute {name!r}")
    value = getattr(importlib.import_module(where), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))


__version__ = "0.1.0"

__all__ = sorted(["ACTIVATIONS", "CONV_TYPES", "NORMS", "POOLS", *_WHERE], key=str.lower)

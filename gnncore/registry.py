"""gnncore's name tables, readable before JAX is imported.

``CONV_TYPES``, ``NORMS``, ``ACTIVATIONS`` and the readouts of ``POOLS`` map a
name to a class or function of gnncore (or JAX). Asking which names there are
(``in``, iteration, ``sorted``) imports nothing; looking one up imports the
module that defines it. An app can then check a configuration and draw its
first page before it loads JAX and Flax (about 0.7 s on a 2-core machine).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["ACTIVATIONS", "CONV_TYPES", "HEADED_KINDS", "NORMS", "POOLS", "POOL_FNS",
           "Registry"]


class Registry(Mapping):
    """A read-only ``{name: object}`` whose objects are imported on first lookup.

    Arguments:
        where: name -> ``"module:attribute"``.
    """

    def __init__(self, where: Mapping[str, str]):
        self._where = dict(where)

    def __getitem__(self, name: str) -> Any:
        module, _, attribute = self._where[name].partition(":")
        return getattr(importlib.import_module(module), attribute)

    def __contains__(self, name: object) -> bool:
        return name in self._where

    def __iter__(self) -> Iterator[str]:
        return iter(self._where)

    def __len__(self) -> int:
        return len(self._where)

    def __repr__(self) -> str:
        return f"Registry({self._where!r})"


def identity(x):
    """The ``"identity"`` activation."""
    return x


#: conv kind (the explorer's name) -> conv class. What a kind supports is
#: declared by its class: ``has_heads``, ``takes_edge_weight``,
#: ``takes_edge_attr`` and ``spec_defaults`` (see :class:`MessagePassing`).
CONV_TYPES = Registry({
    "gcn": "gnncore.conv.gcn:GCNConv", "gat": "gnncore.conv.gat:GATConv",
    "sage": "gnncore.conv.sage:SAGEConv", "gin": "gnncore.conv.gin:GINConv",
    "gatv2": "gnncore.conv.gatv2:GATv2Conv",
    "transformer": "gnncore.conv.transformer:TransformerConv",
    "graph": "gnncore.conv.graph_conv:GraphConv", "cheb": "gnncore.conv.cheb:ChebConv",
    "sg": "gnncore.conv.sg:SGConv"})
#: the kinds of :data:`CONV_TYPES` whose class ``has_heads``, for a caller that
#: must know before the classes are imported (a form's heads field);
#: ``tests/gnncore/test_registry.py`` checks it against the classes
HEADED_KINDS = frozenset({"gat", "gatv2", "transformer"})
#: norm name -> norm class (``GNN(norm=...)``)
NORMS = Registry({"batch": "gnncore.norm:BatchNorm", "layer": "gnncore.norm:LayerNorm",
                  "graph": "gnncore.norm:GraphNorm"})
#: activation name -> function (``GNN(activation=...)``)
ACTIVATIONS = Registry({
    "relu": "jax.nn:relu", "elu": "jax.nn:elu", "gelu": "jax.nn:gelu",
    "leaky_relu": "jax.nn:leaky_relu", "tanh": "jax.numpy:tanh",
    "identity": "gnncore.registry:identity"})
#: readout name -> global pool of :mod:`gnncore.pool` (``"sum"`` is ``global_add_pool``)
POOL_FNS = Registry({
    "mean": "gnncore.pool:global_mean_pool", "sum": "gnncore.pool:global_add_pool",
    "max": "gnncore.pool:global_max_pool", "min": "gnncore.pool:global_min_pool"})
#: the readouts a graph-level :class:`GNN` takes (``pool=``)
POOLS = tuple(POOL_FNS)

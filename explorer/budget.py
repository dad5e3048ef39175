"""A memory budget for one run, checked before the model is built.

The app runs on one server for a whole class, so a single run must not be able
to take its memory: a link, a config file or an upload could ask for a model
whose weights or activations need gigabytes (200 layers, a million heads, a
1,024-wide stack on 50,000 nodes). :func:`check` estimates both from the
settings and the graph's sizes alone, and refuses a run above the budget with a
message that says what to reduce. The estimate is an upper bound of the right
order, not an exact count (``tests/explorer/test_budget.py`` holds it against the
parameter counts of built models).
"""

from __future__ import annotations

import dataclasses

from explorer.config import RunConfig
from explorer.engine.recipe import uses_head
from gnncore.registry import HEADED_KINDS

__all__ = ["MAX_ACTIVATIONS", "MAX_PARAMS", "Estimate", "check", "estimate"]

#: weights of one model, in numbers (float32: 4 bytes; Adam keeps two more copies)
MAX_PARAMS = 25_000_000
#: numbers one training step keeps for the backward pass (node rows and edge messages)
MAX_ACTIVATIONS = 60_000_000

# weight matrices per layer, relative to one in x out matrix (a conv's own
# structure: SAGE and GraphConv have a root and a neighbour weight, GIN a
# two-layer MLP, ChebConv K=2 terms, a Transformer query, key, value and skip)
_WEIGHTS = {"gcn": 1, "gat": 1, "gatv2": 2, "transformer": 4, "sage": 2, "gin": 2,
            "graph": 2, "cheb": 2, "sg": 1}
# node rows kept per layer and output column (the conv's output, the
# activation, the dropout mask)
_NODE_COPIES = 3
# Sum and mean aggregations run as CSR products over ``graph.adj`` (the engine
# passes it): no per-edge message is kept. Attention and max/min aggregations
# gather one message row per edge.
_GATHERED = {"gat", "gatv2", "transformer"}


@dataclasses.dataclass(frozen=True)
class Estimate:
    """Numbers a run holds: ``params`` (weights) and ``activations`` (kept
    for the backward pass of one step), and the layer that holds the most
    activations (index, kind, width, heads)."""

    params: int
    activations: int
    largest_layer: tuple[int, str, int, int]


def estimate(config: RunConfig, *, nodes: int, edges: int, in_features: int,
             classes: int) -> Estimate:
    """The run's size for a graph of ``nodes`` nodes and ``edges`` directed
    edges (self loops are added: counted here), ``in_features`` input columns
    and ``classes`` output classes (a dataset: every graph of the batch)."""
    head = uses_head(config)
    out_layer = None if head else len(config.layers) - 1
    params = activations = 0
    largest, largest_acts = (0, config.layers[0].kind, 0, 1), -1
    width_in = in_features
    loops = edges + nodes
    for i, layer in enumerate(config.layers):
        has_heads = layer.kind in HEADED_KINDS
        heads = int(layer.options.get("heads", 1)) if has_heads else 1
        # the output layer has one column per class and head (its heads are averaged)
        columns = classes * heads if i == out_layer else layer.width
        params += _WEIGHTS.get(layer.kind, 4) * width_in * columns + 5 * columns  # + biases
        acts = _NODE_COPIES * nodes * columns
        if layer.kind in _GATHERED or layer.options.get("aggr") in ("max", "min"):
            acts += loops * columns
        if has_heads:
            acts += 3 * loops * heads  # attention scores, their softmax, dropout
        activations += acts
        if acts > largest_acts:
            largest, largest_acts = (i, layer.kind, layer.width, heads), acts
        width_in = classes if i == out_layer else layer.width
    if head:
        params += width_in * classes + classes
        activations += nodes * width_in + nodes * classes
    return Estimate(params, activations, largest)


def check(config: RunConfig, *, nodes: int, edges: int, in_features: int,
          classes: int) -> Estimate:
    """:func:`estimate`, raising ``ValueError`` when the run is over the
    budget (:data:`MAX_PARAMS`, :data:`MAX_ACTIVATIONS`), with what to
    reduce."""
    size = estimate(config, nodes=nodes, edges=edges, in_features=in_features,
                    classes=classes)
    index, kind, width, heads = size.largest_layer
    stack = (f"{len(config.layers)} layers, the largest layer {index + 1} ({kind}, width "
             f"{width}" + (f", {heads} heads" if heads > 1 else "") + ")")
    if size.activations > MAX_ACTIVATIONS:
        raise ValueError(
            f"this model is too big for the server: a step would keep about "
            f"{_count(size.activations)} numbers (the budget is {_count(MAX_ACTIVATIONS)}) "
            f"on a graph of {nodes:,} nodes and {edges:,} edges with {stack}; reduce the "
            "widths, the heads or the number of layers, or use a smaller graph")
    if size.params > MAX_PARAMS:
        raise ValueError(
            f"this model is too big for the server: about {_count(size.params)} weights "
            f"(the budget is {_count(MAX_PARAMS)}) with {in_features:,} input features, "
            f"{classes:,} classes and {stack}; reduce the widths or the number of layers, "
            "or use fewer node features")
    return size


def _count(n: int) -> str:
    if n >= 10**9:
        return f"{n / 1e9:.1f} billion"
    if n >= 10**6:
        return f"{n / 1e6:.0f} million"
    return f"{n:,}"

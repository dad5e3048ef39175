"""Model stacks: layers of (possibly different) convs, norms, activations,
dropout, residuals and an optional linear head, for node classification — or,
with a pooled readout (``pool=``), for graph classification.

``GNN`` takes a list of :class:`ConvSpec` — one per layer — so the explorer can
let a user pick each layer's type. ``GCN``, ``GAT``, ``GraphSAGE`` and ``GIN``
build the common uniform stacks.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from gnncore.conv import (
    ChebConv,
    GATConv,
    GATv2Conv,
    GCNConv,
    GINConv,
    GraphConv,
    SAGEConv,
    SGConv,
    TransformerConv,
)
from gnncore.inits import linear
from gnncore.norm import BatchNorm, GraphNorm, LayerNorm
from gnncore.segment import segment_reduce
from gnncore.sparse import as_dense

__all__ = ["ACTIVATIONS", "CONV_TYPES", "ConvSpec", "GAT", "GCN", "GIN", "GNN",
           "GraphSAGE", "build_conv"]

CONV_TYPES = {"gcn": GCNConv, "gat": GATConv, "sage": SAGEConv, "gin": GINConv,
              "gatv2": GATv2Conv, "transformer": TransformerConv, "graph": GraphConv,
              "cheb": lambda i, o, K=2, **kw: ChebConv(i, o, K, **kw), "sg": SGConv}
#: kinds whose width is split across concatenated attention heads
HEADED = ("gat", "gatv2", "transformer")
#: kinds that take edge weights / (with edge_dim) edge features
WEIGHTED = ("gcn", "graph", "cheb", "sg")
EDGE_FEATURES = ("gat", "gatv2", "transformer")

ACTIVATIONS = {
    "relu": jax.nn.relu,
    "elu": jax.nn.elu,
    "gelu": jax.nn.gelu,
    "leaky_relu": jax.nn.leaky_relu,
    "tanh": jnp.tanh,
    "identity": lambda x: x,
}


@dataclasses.dataclass(frozen=True)
class ConvSpec:
    """One layer of a :class:`GNN`.

    Arguments:
        kind: ``"gcn"``, ``"gat"``, ``"sage"`` or ``"gin"``.
        out_features: the layer's total output width. For GAT with ``concat``
            (the default) this is ``heads * per_head`` and must divide by ``heads``.
        options: keyword options of that conv, e.g. ``{"heads": 4}`` for GAT or
            ``{"aggr": "max"}`` for SAGE.
    """

    kind: str
    out_features: int
    options: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        if self.kind not in CONV_TYPES:
            raise ValueError(f"unknown conv kind {self.kind!r}; choose one of "
                             f"{sorted(CONV_TYPES)}")
        if int(self.out_features) < 1:
            raise ValueError(f"out_features must be positive; got {self.out_features}")


def build_conv(spec: ConvSpec, in_features: int, *, rngs: nnx.Rngs) -> nnx.Module:
    """Instantiate the conv described by ``spec`` with ``in_features`` inputs."""
    options = dict(spec.options)
    out = spec.out_features
    if spec.kind in HEADED:
        heads = int(options.get("heads", 1))
        if options.get("concat", True):
            if out % heads:
                raise ValueError(f"{spec.kind.upper()} layer width {out} is not divisible "
                                 f"by heads={heads}")
            out //= heads
    return CONV_TYPES[spec.kind](in_features, out, **options, rngs=rngs)


class GNN(nnx.Module):
    """A stack of message-passing layers for node classification.

    Each hidden block is ``conv → [BatchNorm] → activation → [+ residual] →
    dropout``. Without a head the last conv outputs the classes directly (as in
    Kipf & Welling's GCN) and gets no norm, activation or dropout; with
    ``head=True`` every conv is a hidden block and a linear layer follows.

    Arguments:
        in_features: node feature size.
        convs: one :class:`ConvSpec` per layer.
        out_features: number of classes; required with ``head=True`` (then the
            last spec's width is the hidden width).
        activation: a key of :data:`ACTIVATIONS`.
        dropout: dropout rate after each hidden block (own ``dropout`` stream fork).
        batch_norm: a norm after each hidden conv: :class:`BatchNorm` by default,
            or the kind ``norm`` names.
        norm: ``"batch"`` (BatchNorm), ``"layer"`` (graph-wise LayerNorm) or
            ``"graph"`` (GraphNorm). The graph-wise norms take ``batch`` and the
            static ``num_graphs`` of a padded batch (one graph without them).
        residual: add the block's input when its width is unchanged.
        head: end with ``nnx.Linear(last_width, out_features)``.
        pool: ``"mean"``, ``"sum"``, ``"max"`` or ``"min"``: a graph-level model.
            The node embeddings of each graph are pooled (over ``batch``, with
            ``num_graphs`` graphs) before the head; needs ``head=True``.
        rngs: ``nnx.Rngs`` with ``params`` (and ``dropout`` when ``dropout > 0``).

    Call ``model(x, edge_index, edge_weight=None, edge_attr=None)``;
    ``node_mask`` ([N] bool) keeps padding nodes out of BatchNorm statistics; with
    ``return_hidden=True`` it returns ``(logits, [h_1, ..., h_L])``, the output
    of every block (used to colour nodes by embedding). A graph-level model
    (``pool``) takes ``batch`` ([N] graph id per node) and the static
    ``num_graphs`` and returns ``[num_graphs, out_features]``.
    """

    def __init__(self, in_features: int, convs: Sequence[ConvSpec], *,
                 out_features: int | None = None, activation: str = "relu",
                 dropout: float = 0.0, batch_norm: bool = False, residual: bool = False,
                 head: bool = False, pool: str | None = None, norm: str = "batch",
                 rngs: nnx.Rngs):
        convs = list(convs)
        if not convs:
            raise ValueError("a GNN needs at least one conv layer")
        if activation not in ACTIVATIONS:
            raise ValueError(f"unknown activation {activation!r}; choose one of "
                             f"{sorted(ACTIVATIONS)}")
        if pool is not None and (pool not in POOLS or not head):
            raise ValueError(f"pool must be one of {POOLS} and needs head=True; got "
                             f"pool={pool!r}, head={head}")
        if norm not in NORMS:
            raise ValueError(f"unknown norm {norm!r}; choose one of {sorted(NORMS)}")
        if head and out_features is None:
            raise ValueError("head=True needs out_features (the number of classes)")
        if not head and out_features is not None and convs[-1].out_features != out_features:
            raise ValueError(f"the last conv outputs {convs[-1].out_features} features but "
                             f"out_features={out_features}")
        self.activation, self.residual, self.has_head = activation, residual, head
        self.pool, self.norm = pool, norm
        self.num_hidden = len(convs) if head else len(convs) - 1
        layers, norms, widths = [], [], [in_features]
        for i, spec in enumerate(convs):
            layers.append(build_conv(spec, widths[-1], rngs=rngs))
            widths.append(spec.out_features)
            if batch_norm and i < self.num_hidden:
                norms.append(NORMS[norm](spec.out_features, rngs=rngs))
        self.convs = nnx.List(layers)
        self.norms = nnx.List(norms)
        self.kinds = tuple(spec.kind for spec in convs)
        self.widths = tuple(widths)
        self.dropout = nnx.Dropout(dropout, rngs=rngs) if dropout > 0 else None
        self.head = linear(widths[-1], out_features, rngs=rngs) if head else None
        self.out_features = out_features if head else widths[-1]

    def _conv(self, i, x, edge_index, edge_weight, edge_attr):
        conv, kind = self.convs[i], self.kinds[i]
        if kind in WEIGHTED:
            return conv(x, edge_index, edge_weight)
        if kind in EDGE_FEATURES and conv.edge_dim is not None:
            return conv(x, edge_index, edge_attr)
        return conv(x, edge_index)

    def __call__(self, x, edge_index, edge_weight=None, edge_attr=None, *,
                 node_mask=None, batch=None, num_graphs: int | None = None,
                 return_hidden: bool = False):
        act = ACTIVATIONS[self.activation]
        hidden = []
        for i in range(len(self.convs)):
            h = self._conv(i, x, edge_index, edge_weight, edge_attr)
            if i < self.num_hidden:
                if len(self.norms):
                    if self.norm == "batch":
                        h = self.norms[i](h, mask=node_mask)
                    else:
                        h = self.norms[i](h, batch, num_graphs, mask=node_mask)
                h = act(h)
                if self.residual and h.shape == x.shape:
                    h = h + as_dense(x)
                if self.dropout is not None:
                    h = self.dropout(h)
            hidden.append(h)
            x = h
        if self.pool is not None:
            x = _readout(x, self.pool, batch, num_graphs, node_mask)
        if self.head is not None:
            x = self.head(x)
        return (x, hidden) if return_hidden else x


POOLS = ("mean", "sum", "max", "min")
NORMS = {"batch": BatchNorm, "layer": LayerNorm, "graph": GraphNorm}


def _readout(x, pool, batch, num_graphs, node_mask):
    """Pool node rows per graph: ``[num_graphs, F]`` (one graph when ``batch``
    is None; then ``node_mask`` keeps padding nodes out)."""
    if batch is None:
        batch = jnp.zeros(x.shape[0], jnp.int32)
        if node_mask is not None:  # padding nodes go to a second, dropped segment
            batch = jnp.where(node_mask, 0, 1)
            return segment_reduce(x, batch, 2, pool)[:1]
        num_graphs = 1
    if num_graphs is None:
        if isinstance(batch, jax.core.Tracer):
            raise ValueError("num_graphs: a graph-level model under a trace needs the "
                             "static number of graphs (e.g. Batch.num_graphs)")
        num_graphs = int(jnp.max(batch)) + 1
    return segment_reduce(x, batch, int(num_graphs), pool)


def _uniform(kind, in_features, hidden_features, out_features, num_layers, head,
             options):
    if num_layers < 1:
        raise ValueError("num_layers must be at least 1")
    widths = [hidden_features] * (num_layers if head else num_layers - 1)
    if not head:
        widths.append(out_features)
    specs = [ConvSpec(kind, w, dict(options)) for w in widths]
    return specs


def _make(kind, doc):
    def make(in_features: int, hidden_features: int, out_features: int, *,
             num_layers: int = 2, dropout: float = 0.5, activation: str = "relu",
             batch_norm: bool = False, residual: bool = False, head: bool = False,
             rngs: nnx.Rngs, **conv_options) -> GNN:
        specs = _uniform(kind, in_features, hidden_features, out_features, num_layers,
                         head, conv_options)
        if kind == "gat" and not head and specs[-1].options.get("concat", True):
            # The output layer averages its heads instead of concatenating.
            specs[-1] = ConvSpec("gat", out_features, {**specs[-1].options, "concat": False})
        return GNN(in_features, specs, out_features=out_features, activation=activation,
                   dropout=dropout, batch_norm=batch_norm, residual=residual, head=head,
                   rngs=rngs)

    make.__name__ = make.__qualname__ = {"gcn": "GCN", "gat": "GAT", "sage": "GraphSAGE",
                                         "gin": "GIN"}[kind]
    make.__doc__ = doc
    return make


_COMMON = """

    Arguments:
        in_features, hidden_features, out_features: input, hidden and class sizes.
        num_layers: number of conv layers.
        dropout, activation, batch_norm, residual, head: see :class:`GNN`.
        rngs: ``nnx.Rngs``.
        **conv_options: passed to every conv (e.g. ``heads=8`` for GAT).
    """
GCN = _make("gcn", "A uniform stack of :class:`GCNConv` layers." + _COMMON)
GAT = _make("gat", "A uniform stack of :class:`GATConv` layers; ``hidden_features`` "
            "is the total width (heads × per-head); the output layer averages heads."
            + _COMMON)
GraphSAGE = _make("sage", "A uniform stack of :class:`SAGEConv` layers." + _COMMON)
GIN = _make("gin", "A uniform stack of :class:`GINConv` layers (default MLPs)." + _COMMON)

"""Model stacks: layers of (possibly different) convs, norms, activations,
dropout, residuals and an optional linear head, for node classification — or,
with a pooled readout (``pool=``), for graph classification.

``GNN`` takes a list of :class:`ConvSpec` — one per layer — so the explorer can
let a user pick each layer's type; what each kind supports is declared by its
conv class (:data:`CONV_TYPES`). ``GCN``, ``GAT``, ``GraphSAGE`` and ``GIN`` are
:class:`BasicGNN` subclasses that build the common uniform stacks.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from flax import nnx

from gnncore.inits import linear
from gnncore.registry import ACTIVATIONS, CONV_TYPES, NORMS, POOL_FNS, POOLS  # re-exported
from gnncore.sparse import as_dense
from gnncore.utils import _static_num_graphs

__all__ = ["ACTIVATIONS", "CONV_TYPES", "NORMS", "POOLS", "BasicGNN", "ConvSpec", "GAT", "GCN",
           "GIN", "GNN", "GraphSAGE", "build_conv"]

@dataclasses.dataclass(frozen=True)
class ConvSpec:
    """One layer of a :class:`GNN`.

    Arguments:
        kind: a key of :data:`CONV_TYPES` (``"gcn"``, ``"gat"``, ``"sage"``, ...).
        out_features: the layer's total output width. For a conv with
            ``has_heads`` (GAT, GATv2, Transformer) and ``concat`` (the default)
            this is ``heads * per_head`` and must divide by ``heads``.
        options: keyword options of that conv, e.g. ``{"heads": 4}`` for GAT or
            ``{"aggr": "max"}`` for SAGE; the conv class's ``spec_defaults``
            fill in the ones not given (``K=2`` for ChebConv).
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
    """Instantiate the conv described by ``spec`` with ``in_features`` inputs.

    The options are the conv class's ``spec_defaults`` updated with
    ``spec.options``; for a class with ``has_heads`` (and ``concat``, the
    default) the total width ``spec.out_features`` is split across ``heads``.
    """
    conv_cls = CONV_TYPES[spec.kind]
    options = {**conv_cls.spec_defaults, **spec.options}
    out = spec.out_features
    if conv_cls.has_heads:
        heads = int(options.get("heads", 1))
        if options.get("concat", True):
            if out % heads:
                raise ValueError(f"{spec.kind.upper()} layer width {out} is not divisible "
                                 f"by heads={heads}")
            out //= heads
    return conv_cls(in_features, out, **options, rngs=rngs)


class GNN(nnx.Module):
    """A stack of message-passing layers for node classification.

    Each hidden block is ``conv → [norm] → activation → [+ residual] →
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
        norm: a norm after each hidden conv (a key of :data:`NORMS`): ``None``
            (no norm, the default), ``"batch"`` (BatchNorm), ``"layer"``
            (graph-wise LayerNorm) or ``"graph"`` (GraphNorm). The graph-wise
            norms take ``batch`` and the static ``num_graphs`` of a padded
            batch (one graph without them).
        residual: add the block's input when its width is unchanged.
        head: end with ``nnx.Linear(last_width, out_features)``.
        pool: a readout of :data:`POOLS` (``"mean"``, ``"sum"``, ``"max"`` or
            ``"min"``): a graph-level model. The node embeddings of each graph
            are pooled (over ``batch``, with ``num_graphs`` graphs) by
            :mod:`gnncore.pool`'s ``global_*_pool`` before the head; needs
            ``head=True``.
        rngs: ``nnx.Rngs`` with ``params`` (and ``dropout`` when ``dropout > 0``).

    Call ``model(x, edge_index, edge_weight=None, edge_attr=None)``: each conv
    gets ``edge_weight`` if its class ``takes_edge_weight``, ``edge_attr`` if it
    ``takes_edge_attr`` and was built with ``edge_dim``, else neither.
    ``node_mask`` ([N] bool) keeps padding nodes out of the norms' statistics
    (and, for one graph without ``batch``, out of the readout; a padded
    :class:`~gnncore.batch.Batch` keeps them in its own padding graph); with
    ``return_hidden=True`` it returns ``(logits, [h_1, ..., h_L])``, the output
    of every block (used to colour nodes by embedding). A graph-level model
    (``pool``) takes ``batch`` ([N] graph id per node) and the static
    ``num_graphs`` and returns ``[num_graphs, out_features]``.
    """

    def __init__(self, in_features: int, convs: Sequence[ConvSpec], *,
                 out_features: int | None = None, activation: str = "relu",
                 dropout: float = 0.0, norm: str | None = None, residual: bool = False,
                 head: bool = False, pool: str | None = None, rngs: nnx.Rngs):
        convs = list(convs)
        if not convs:
            raise ValueError("a GNN needs at least one conv layer")
        if activation not in ACTIVATIONS:
            raise ValueError(f"unknown activation {activation!r}; choose one of "
                             f"{sorted(ACTIVATIONS)}")
        if pool is not None and (pool not in POOLS or not head):
            raise ValueError(f"pool must be one of {POOLS} and needs head=True; got "
                             f"pool={pool!r}, head={head}")
        if norm is not None and norm not in NORMS:
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
            if norm is not None and i < self.num_hidden:
                norms.append(NORMS[norm](spec.out_features, rngs=rngs))
        self.convs = nnx.List(layers)
        self.norms = nnx.List(norms)
        self.kinds = tuple(spec.kind for spec in convs)
        self.widths = tuple(widths)
        self.dropout = nnx.Dropout(dropout, rngs=rngs) if dropout > 0 else None
        self.head = linear(widths[-1], out_features, rngs=rngs) if head else None
        self.out_features = out_features if head else widths[-1]

    def _conv(self, i, x, edge_index, edge_weight, edge_attr):
        conv = self.convs[i]
        if conv.takes_edge_weight:
            return conv(x, edge_index, edge_weight)
        if conv.takes_edge_attr and getattr(conv, "edge_dim", None) is not None:
            return conv(x, edge_index, edge_attr)
        return conv(x, edge_index)

    def _readout(self, x, batch, num_graphs, node_mask):
        """Pool node rows per graph with :mod:`gnncore.pool`: ``[num_graphs, F]``.

        Without ``batch`` it is one graph, and ``node_mask`` keeps padding nodes
        out. With ``batch`` every node counts (a padded Batch puts its padding
        nodes in a padding graph of their own) and ``num_graphs`` must be static
        under a trace.
        """
        pool = POOL_FNS[self.pool]
        if batch is None:
            return pool(x, None, 1, mask=node_mask)
        return pool(x, batch, _static_num_graphs(batch, num_graphs, arg="num_graphs"))

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
            x = self._readout(x, batch, num_graphs, node_mask)
        if self.head is not None:
            x = self.head(x)
        return (x, hidden) if return_hidden else x


class BasicGNN(GNN):
    """A uniform stack of one conv kind (PyG's ``BasicGNN``): the base of
    :class:`GCN`, :class:`GAT`, :class:`GraphSAGE` and :class:`GIN`.

    A subclass names its kind in ``conv_kind`` (a key of :data:`CONV_TYPES`);
    what the model then supports is read from that conv class, never written
    twice: ``conv_class``, ``has_heads``, ``takes_edge_weight`` and
    ``takes_edge_attr``. A headed model's output layer (without a head)
    averages its heads instead of concatenating them.

    Arguments:
        in_features, hidden_features, out_features: input, hidden and class sizes
            (``hidden_features`` is a layer's total width: heads × per-head).
        num_layers: number of conv layers.
        dropout, activation, norm, residual, head: see :class:`GNN`.
        rngs: ``nnx.Rngs``.
        **conv_options: passed to every conv (e.g. ``heads=8`` for GAT).
    """

    conv_kind: ClassVar[str]
    conv_class: ClassVar[type]
    has_heads: ClassVar[bool]
    takes_edge_weight: ClassVar[bool]
    takes_edge_attr: ClassVar[bool]

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "conv_kind" in cls.__dict__:
            cls.conv_class = CONV_TYPES[cls.conv_kind]
            cls.has_heads = cls.conv_class.has_heads
            cls.takes_edge_weight = cls.conv_class.takes_edge_weight
            cls.takes_edge_attr = cls.conv_class.takes_edge_attr

    def __init__(self, in_features: int, hidden_features: int, out_features: int, *,
                 num_layers: int = 2, dropout: float = 0.5, activation: str = "relu",
                 norm: str | None = None, residual: bool = False, head: bool = False,
                 rngs: nnx.Rngs, **conv_options):
        if not hasattr(type(self), "conv_class"):
            raise TypeError("BasicGNN is a base class: use GCN, GAT, GraphSAGE or GIN, "
                            "or a subclass that sets conv_kind")
        if num_layers < 1:
            raise ValueError("num_layers must be at least 1")
        kind = self.conv_kind
        widths = [hidden_features] * (num_layers if head else num_layers - 1)
        if not head:
            widths.append(out_features)
        specs = [ConvSpec(kind, w, dict(conv_options)) for w in widths]
        if self.has_heads and not head and specs[-1].options.get("concat", True):
            # The output layer averages its heads instead of concatenating.
            specs[-1] = ConvSpec(kind, out_features, {**specs[-1].options, "concat": False})
        super().__init__(in_features, specs, out_features=out_features,
                         activation=activation, dropout=dropout, norm=norm,
                         residual=residual, head=head, rngs=rngs)


class GCN(BasicGNN):
    """A uniform stack of :class:`GCNConv` layers (see :class:`BasicGNN` for
    the arguments)."""

    conv_kind = "gcn"


class GAT(BasicGNN):
    """A uniform stack of :class:`GATConv` layers; ``hidden_features`` is the
    total width (heads × per-head); the output layer averages heads (see
    :class:`BasicGNN` for the arguments)."""

    conv_kind = "gat"


class GraphSAGE(BasicGNN):
    """A uniform stack of :class:`SAGEConv` layers (see :class:`BasicGNN` for
    the arguments)."""

    conv_kind = "sage"


class GIN(BasicGNN):
    """A uniform stack of :class:`GINConv` layers with their default MLPs (see
    :class:`BasicGNN` for the arguments)."""

    conv_kind = "gin"

r"""One big graph over several devices: full-batch node classification with the
nodes partitioned across a 1-D device mesh.

The idea. Node ``i`` of an ``N``-node graph lives on part ``i // b`` (``b =
ceil(N / P)`` real nodes per part, contiguous blocks), so each of the ``P``
devices holds ``1/P`` of the node rows (features, labels, masks, every hidden
layer). An edge ``j -> i`` belongs to the part of its *target* ``i``: a device
aggregates into its own rows only, so no partial sums are ever added up across
devices. What a device lacks are the features of *remote* sources ``j``, and
every message-passing layer fetches them inside the step, in one of two ways
(the ``exchange`` of :func:`partition_graph`):

- ``"all_gather"``: each device all-gathers the layer's node rows of every
  part (``jax.lax.all_gather``) and gathers its edges' sources from that full
  ``[P * R, F]`` array. Simple and independent of the graph's structure, but
  every device receives ``(P - 1) * R`` rows per layer and holds the whole
  feature matrix for the duration of the layer (the backward pass turns the
  all-gather into a reduce-scatter of the same size).
- ``"halo"``: each device receives only the remote rows its edges need. The
  host precomputes, per ordered pair of parts, the list of local rows that one
  sends to the other, padded to one length ``H`` (the largest such list), and
  inside the step a ring of ``P - 1`` ``jax.lax.ppermute`` delivers them (at
  shift ``s`` every part sends to the part ``s`` ahead; unlike an
  ``all_to_all``, no block is sent to itself); sources are then gathered from
  ``[local rows + received halo]`` (``R + (P - 1) * H`` rows). The
  traffic is the distinct remote sources (padded per pair) instead of the whole
  graph, plus a gather into the send buffer (a scatter-add in the backward
  pass). It wins when the parts are
  local (few cut edges: nodes ordered by community, time or a partitioner such
  as METIS before calling :func:`partition_graph`); on a graph whose edges are
  random, almost every part needs almost every row of every other part,
  ``H`` approaches ``R`` and the halo costs what the all-gather does plus the
  extra gather. Padding every pair to the largest list also means that one
  unusually connected pair sets the traffic of all pairs.

Layout. Each part has ``R = b + 1`` rows: its real nodes, then padding rows, the
last of which (row ``R - 1``) is the part's *sink*. Every part's edges are
padded to one count with edges sink -> sink (weight 0), so padding changes no
real node's sum, mean or GCN coefficient, and sizes stay static: one compiled
step for all devices. Edge lists are stored per part as a bipartite
:class:`~gnncore.sparse.Adjacency` from the ``num_src`` source rows a device can
read (``P * R`` for the all-gather, ``R + (P - 1) * H`` for the halo) to its ``R``
target rows, so gnncore's own layers run unchanged on it: their ``propagate``,
``message`` and fused CSR kernel (:func:`~gnncore.sparse.spmm`) do the maths.
GCN's symmetric normalisation needs the degrees of the *whole* graph; it is
computed once on the host with :func:`~gnncore.utils.gcn_norm` over all edges
(exactly what :class:`~gnncore.conv.GCNConv` computes on the unpartitioned
graph) and the normalised edges, self-loops included, are partitioned like the
others.

Use::

    pg = partition_graph(graph, 4, exchange="halo")    # host side, numpy
    mesh = make_mesh(4)                                  # a 1-D mesh, axis "parts"
    pg = shard_graph(pg, mesh)                           # each device: 1/4 of the rows
    model = GCN(F, 128, C, num_layers=2, dropout=0.0, rngs=nnx.Rngs(0))
    optimizer = nnx.Optimizer(model, optax.adam(1e-2), wrt=nnx.Param)
    step = nnx.jit(functools.partial(train_step, mesh=mesh))
    loss = step(model, optimizer, pg)
    logits = pg.unpad_nodes(forward(model, pg, mesh=mesh))   # [N, C], node order

The model's parameters are replicated (every device holds them all); their
gradients are summed over the devices by ``jax.shard_map``'s transpose. Supported
models: :class:`~gnncore.conv.GCNConv`, :class:`~gnncore.conv.SAGEConv`, and
:class:`~gnncore.models.GNN` stacks of them (``GCN``, ``GraphSAGE``) with any
activation, residuals and a linear head; norms (statistics over all nodes) and
active dropout are refused with a ``ValueError``.

On CPU, several devices come from ``XLA_FLAGS=--xla_force_host_platform_device_count=N``
set before JAX starts; they share the same cores, so they show the overhead of
the partitioning, not a speed-up.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from gnncore.conv import GCNConv, SAGEConv
from gnncore.message_passing import MessagePassing
from gnncore.models import ACTIVATIONS, GNN
from gnncore.sparse import Adjacency, apply_linear, as_dense
from gnncore.utils import gcn_norm

__all__ = ["AXIS", "EXCHANGES", "PartitionedGraph", "aggregate", "forward", "make_mesh",
           "node_loss", "partition_graph", "shard_graph", "train_step"]

#: the default name of the mesh axis the nodes are split over
AXIS = "parts"
#: the ways remote source features reach a device (see the module docstring)
EXCHANGES = ("all_gather", "halo")

_NODE_FIELDS = ("x", "y", "train_mask", "val_mask", "test_mask", "node_mask")
_PART_FIELDS = ("adj", "edge_weight", "gcn_adj", "gcn_weight", "send_index")
_META_FIELDS = ("num_nodes", "num_edges", "num_parts", "rows_per_part", "exchange",
                "edges_per_part", "halo_size", "halo_rows", "gcn_improved")


@dataclasses.dataclass(frozen=True, eq=False)
class PartitionedGraph:
    """A graph split into ``num_parts`` parts by node, as arrays. A pytree.

    Node arrays have ``num_parts * rows_per_part`` rows, part ``p`` owning rows
    ``p * R .. (p + 1) * R - 1``; per-part arrays have a leading axis of
    ``num_parts``. Shard both along their first axis (:func:`shard_graph`).

    Arguments:
        x: ``[P * R, F]`` float32 node features (0 on padding rows).
        y: ``[P * R]`` int32 labels (-1 on padding rows) or ``None``.
        train_mask, val_mask, test_mask: ``[P * R]`` bool (False on padding) or ``None``.
        node_mask: ``[P * R]`` bool, True on the real nodes.
        adj: the graph's edges, per part: an :class:`~gnncore.sparse.Adjacency`
            whose arrays have a leading ``[P]`` axis, from ``num_src`` source
            rows (numbered for the exchange) to the part's ``R`` rows.
        edge_weight: ``[P, E]`` weights of those edges (0 on padding), or
            ``None`` when the graph has none.
        gcn_adj, gcn_weight: the GCN-normalised edges (self-loops included)
            and their coefficients, laid out the same way; ``None`` unless
            built with ``gcn=True``.
        send_index: ``[P, (P - 1) * H]`` int32 (halo only): on part ``q``,
            block ``s - 1`` lists the local rows that part ``(q + s) mod P``
            needs from ``q`` (padded with the sink row). ``None`` for the
            all-gather.
        num_nodes, num_edges: the real graph's sizes (static).
        num_parts: ``P`` (static).
        rows_per_part: ``R`` (static): ``ceil(num_nodes / P)`` real rows plus
            at least one padding row (the sink, row ``R - 1``).
        exchange: ``"all_gather"`` or ``"halo"`` (static).
        edges_per_part: ``E``, the padded edge count of ``adj`` per part (static;
            ``gcn_adj`` has ``E + R - 1``).
        halo_size: ``H``, the rows one part sends another per layer (static;
            0 for the all-gather, and when no edge crosses parts).
        halo_rows: the real rows the halo moves per layer, over all parts
            (static; 0 for the all-gather).
        gcn_improved: the ``improved`` flag the GCN coefficients were built with.

    Build it with :func:`partition_graph`.
    """

    x: Any
    y: Any = None
    train_mask: Any = None
    val_mask: Any = None
    test_mask: Any = None
    node_mask: Any = None
    adj: Any = None
    edge_weight: Any = None
    gcn_adj: Any = None
    gcn_weight: Any = None
    send_index: Any = None
    num_nodes: int = 0
    num_edges: int = 0
    num_parts: int = 1
    rows_per_part: int = 1
    exchange: str = "all_gather"
    edges_per_part: int = 0
    halo_size: int = 0
    halo_rows: int = 0
    gcn_improved: bool = False

    @property
    def block(self) -> int:
        """Real node slots per part, ``b = ceil(num_nodes / num_parts)``."""
        return self.rows_per_part - 1

    @property
    def num_src(self) -> int:
        """Source rows a part's adjacency spans: ``P * R`` (all-gather) or
        ``R + (P - 1) * H`` (halo)."""
        if self.exchange == "all_gather":
            return self.num_parts * self.rows_per_part
        return self.rows_per_part + (self.num_parts - 1) * self.halo_size

    @property
    def padded_nodes(self) -> int:
        """Rows of every node array, ``P * R``."""
        return self.num_parts * self.rows_per_part

    def node_positions(self) -> np.ndarray:
        """``[num_nodes]``: the row of each real node in the node arrays (host)."""
        ids = np.arange(self.num_nodes)
        return (ids // self.block) * self.rows_per_part + ids % self.block

    def pad_nodes(self, values, fill=0) -> np.ndarray:
        """A host array ``[num_nodes, ...]`` in node order laid out as the node
        arrays: ``[P * R, ...]`` with ``fill`` on the padding rows."""
        values = np.asarray(values)
        if values.shape[:1] != (self.num_nodes,):
            raise ValueError(f"values must have {self.num_nodes} rows (one per node); "
                             f"got shape {values.shape}")
        out = np.full((self.padded_nodes,) + values.shape[1:], fill, values.dtype)
        out[self.node_positions()] = values
        return out

    def unpad_nodes(self, values) -> np.ndarray:
        """The real nodes' rows of ``[P * R, ...]`` values, in node order, as a
        host array ``[num_nodes, ...]`` (eager only: it reads the values)."""
        if isinstance(values, jax.core.Tracer):
            raise ValueError("unpad_nodes reads the values on the host: call it outside jit")
        values = np.asarray(values)
        if values.shape[:1] != (self.padded_nodes,):
            raise ValueError(f"values must have {self.padded_nodes} rows (P * R); "
                             f"got shape {values.shape}")
        return values[self.node_positions()]

    def replace(self, **changes) -> PartitionedGraph:
        """A copy with some fields replaced (no validation)."""
        return dataclasses.replace(self, **changes)

    def __repr__(self) -> str:
        return (f"PartitionedGraph(num_nodes={self.num_nodes}, num_edges={self.num_edges}, "
                f"num_parts={self.num_parts}, rows_per_part={self.rows_per_part}, "
                f"edges_per_part={self.edges_per_part}, exchange={self.exchange!r}, "
                f"halo_size={self.halo_size})")


jax.tree_util.register_dataclass(
    PartitionedGraph, data_fields=list(_NODE_FIELDS + _PART_FIELDS),
    meta_fields=list(_META_FIELDS))


# ================================================================== host side
def _static_size(value, name: str, needed: int, minimum: int = 1) -> int:
    """``needed`` (at least ``minimum``) when ``value`` is None, else ``value``
    checked to be an int of at least that."""
    needed = max(int(needed), minimum)
    if value is None:
        return needed
    try:
        size = int(value)
    except TypeError as err:
        raise ValueError(f"{name} must be a static Python int; got "
                         f"{type(value).__name__}") from err
    if size < needed:
        raise ValueError(f"{name}={size} is too small: this graph needs at least {needed}")
    return size


def _host(value, name: str):
    if value is None:
        return None
    if isinstance(value, jax.core.Tracer):
        raise ValueError(f"partition_graph runs on the host, outside jit: graph.{name} is "
                         "traced. Partition once, then pass the PartitionedGraph to the "
                         "compiled step")
    return np.asarray(value)


# one compiled program instead of a dozen eager ops (each compiled on its own)
_gcn_norm = jax.jit(gcn_norm, static_argnames=("num_nodes", "improved", "add_self_loops"))


def _row_pointers(rows: np.ndarray, n: int) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=n))]).astype(np.int32)


def _part_adjacency(col, row, weight, *, num_src: int, num_rows: int, num_edges: int,
                    sink_col: int):
    """One part's edges padded to ``num_edges`` (sink -> sink, weight 0) and
    sorted by target then source: the host arrays of an :class:`Adjacency`."""
    extra = num_edges - col.shape[0]
    col = np.concatenate([col, np.full(extra, sink_col, np.int64)])
    row = np.concatenate([row, np.full(extra, num_rows - 1, np.int64)])
    order = np.lexsort((col, row))
    col, row = col[order], row[order]
    w = None
    if weight is not None:
        w = np.concatenate([weight, np.zeros(extra, np.float32)])[order].astype(np.float32)
    arrays = (np.stack([col, row]).astype(np.int32), _row_pointers(row, num_rows),
              np.lexsort((row, col)).astype(np.int32), _row_pointers(col, num_src))
    return arrays, w


def partition_graph(graph, num_parts: int, *, exchange: str = "halo", gcn: bool = True,
                    improved: bool = False, edges_per_part: int | None = None,
                    halo_size: int | None = None) -> PartitionedGraph:
    """Split a graph by node into ``num_parts`` contiguous, equally sized parts.

    Host side (numpy): the result holds host arrays; place them on a mesh with
    :func:`shard_graph`. Each edge goes to the part of its target; the node
    count need not divide by ``num_parts`` (parts are padded), and parts may
    have very different edge counts (all are padded to the largest).

    Arguments:
        graph: a :class:`~gnncore.graph.Graph` (``x`` required; ``y``, the masks
            and ``edge_weight`` are carried over when present; the GCN
            coefficients use ``edge_weight``, as ``GCNConv(x, edge_index,
            edge_weight)`` does).
        num_parts: ``P``, the number of devices on the mesh axis.
        exchange: ``"halo"`` (each device receives only the remote rows its
            edges need) or ``"all_gather"`` (each device receives all rows);
            see the module docstring for the trade-off.
        gcn: also build the GCN-normalised edges that :class:`GCNConv` layers
            need (``gcn_norm`` over the whole graph, self-loops added).
        improved: GCN's ``A + 2I`` instead of ``A + I`` (must match the layers'
            ``improved``).
        edges_per_part: a static edge count per part to pad to (default: the
            largest part's); a value too small raises ``ValueError``. Fix it
            (and ``halo_size``) to reuse one compiled step across graphs.
        halo_size: a static ``H``, the rows one part sends another (halo only;
            default: the largest pair's need; 0 is allowed when no edge crosses
            parts).

    Returns:
        a :class:`PartitionedGraph` with static sizes.
    """
    if exchange not in EXCHANGES:
        raise ValueError(f"unknown exchange {exchange!r}; choose one of {list(EXCHANGES)}")
    try:
        num_parts = int(num_parts)
    except TypeError as err:
        raise ValueError("num_parts must be a static Python int") from err
    if num_parts < 1:
        raise ValueError(f"num_parts must be at least 1; got {num_parts}")
    x = _host(graph.x, "x")
    if x is None:
        raise ValueError("partition_graph needs node features: graph.x is None")
    ei = _host(graph.edge_index, "edge_index").astype(np.int64)
    ew = _host(graph.edge_weight, "edge_weight")
    n, num_edges = int(graph.num_nodes), int(ei.shape[1])
    b = -(-n // num_parts)
    R = b + 1
    src, dst = ei
    s_part, d_part = src // b, dst // b

    # ---- halo plan: per (target part p, source part q != p) the rows p needs,
    # in node order; q sends them to p at ring shift (p - q) mod P
    remote = s_part != d_part
    halo_keys = np.unique(d_part[remote] * n + src[remote])
    hp, hs = halo_keys // n, halo_keys % n
    hq = hs // b
    group = hp * num_parts + hq
    counts = np.bincount(group, minlength=num_parts * num_parts)
    first = np.concatenate([[0], np.cumsum(counts)[:-1]])
    rank = np.arange(halo_keys.shape[0]) - first[group]
    shift = (hp - hq) % num_parts  # 1 .. P-1
    if exchange == "halo":
        H = _static_size(halo_size, "halo_size", counts.max(initial=0), minimum=0)
        send = np.full((num_parts, (num_parts - 1) * H), R - 1, np.int32)
        send[hq, (shift - 1) * H + rank] = hs % b
        num_src, halo_rows = R + (num_parts - 1) * H, int(halo_keys.shape[0])
    else:
        if halo_size is not None:
            raise ValueError("halo_size applies to exchange='halo' only")
        H, send, num_src, halo_rows = 0, None, num_parts * R, 0

    def columns(s, d):
        """Source columns of edges s -> d in the numbering of the exchange."""
        sp, dp = s // b, d // b
        if exchange == "all_gather":
            return sp * R + s % b
        col = s % b
        far = sp != dp
        pos = np.searchsorted(halo_keys, dp[far] * n + s[far])
        col[far] = R + (shift[pos] - 1) * H + rank[pos]
        return col

    def layout(s, d, w, per_part):
        col, dp = columns(s, d), d // b
        order = np.argsort(dp, kind="stable")
        bounds = np.searchsorted(dp[order], np.arange(num_parts + 1))
        parts, weights = [], []
        for p in range(num_parts):
            sel = order[bounds[p]:bounds[p + 1]]
            arrays, wp = _part_adjacency(
                col[sel], d[sel] % b, None if w is None else w[sel], num_src=num_src,
                num_rows=R, num_edges=per_part,
                sink_col=(p * R + R - 1) if exchange == "all_gather" else R - 1)
            parts.append(arrays)
            weights.append(wp)
        adj = Adjacency(*(np.stack(a) for a in zip(*parts)), num_src=num_src, num_dst=R)
        return adj, None if w is None else np.stack(weights)

    E = _static_size(edges_per_part, "edges_per_part",
                     np.bincount(d_part, minlength=num_parts).max(initial=0))
    adj, edge_weight = layout(src, dst, ew, E)
    gcn_adj = gcn_weight = None
    if gcn:
        index, weight = _gcn_norm(ei.astype(np.int32), n,
                                  edge_weight=None if ew is None else ew.astype(np.float32),
                                  improved=bool(improved))
        index = np.asarray(index).astype(np.int64)
        # the loops gcn_norm appends are local: at most b more edges per part
        gcn_adj, gcn_weight = layout(index[0], index[1], np.asarray(weight), E + b)

    pos = (np.arange(n) // b) * R + np.arange(n) % b

    def nodes(value, fill, dtype):
        if value is None:
            return None
        value = np.asarray(value)
        out = np.full((num_parts * R,) + value.shape[1:], fill, dtype)
        out[pos] = value
        return out

    return PartitionedGraph(
        x=nodes(x, 0, np.float32), y=nodes(_host(graph.y, "y"), -1, np.int32),
        train_mask=nodes(_host(graph.train_mask, "train_mask"), False, bool),
        val_mask=nodes(_host(graph.val_mask, "val_mask"), False, bool),
        test_mask=nodes(_host(graph.test_mask, "test_mask"), False, bool),
        node_mask=nodes(np.ones(n, bool), False, bool),
        adj=adj, edge_weight=edge_weight, gcn_adj=gcn_adj, gcn_weight=gcn_weight,
        send_index=send, num_nodes=n, num_edges=num_edges, num_parts=num_parts,
        rows_per_part=R, exchange=exchange, edges_per_part=E, halo_size=H,
        halo_rows=halo_rows, gcn_improved=bool(improved))


def make_mesh(num_parts: int, *, axis: str = AXIS, devices=None) -> jax.sharding.Mesh:
    """A 1-D mesh of ``num_parts`` devices (the first of ``jax.devices()``).

    Arguments:
        num_parts: devices on the axis; ``ValueError`` if there are fewer.
        axis: the axis name (default ``"parts"``).
        devices: the devices to use instead of ``jax.devices()``.
    """
    devices = list(jax.devices() if devices is None else devices)
    if len(devices) < num_parts:
        raise ValueError(
            f"num_parts={num_parts} needs {num_parts} devices but there are "
            f"{len(devices)}; on CPU set XLA_FLAGS=--xla_force_host_platform_device_count="
            f"{num_parts} before JAX starts")
    return jax.sharding.Mesh(np.asarray(devices[:num_parts]), (axis,),
                             axis_types=(jax.sharding.AxisType.Auto,))


def _check_mesh(pg: PartitionedGraph, mesh, axis: str) -> None:
    if axis not in mesh.axis_names:
        raise ValueError(f"axis={axis!r} is not an axis of the mesh {mesh.axis_names}")
    if mesh.shape[axis] != pg.num_parts:
        raise ValueError(f"the mesh's axis {axis!r} has {mesh.shape[axis]} devices but the "
                         f"graph was partitioned into num_parts={pg.num_parts}")


def shard_graph(pg: PartitionedGraph, mesh, *, axis: str = AXIS) -> PartitionedGraph:
    """Place every array of ``pg`` on ``mesh``, split along its first axis, so
    that each device holds its own part only (``1/P`` of the node rows).

    Arguments:
        pg: a :class:`PartitionedGraph` (host or device arrays).
        mesh: a mesh with an axis ``axis`` of ``pg.num_parts`` devices.
        axis: the mesh axis the parts are spread over.
    """
    _check_mesh(pg, mesh, axis)
    sharding = NamedSharding(mesh, P(axis))
    return jax.tree.map(lambda a: jax.device_put(a, sharding), pg)


# ================================================================== in the step
def _local(pg: PartitionedGraph) -> PartitionedGraph:
    """Inside shard_map: drop the leading part axis (length 1) of per-part arrays."""
    squeeze = lambda tree: jax.tree.map(lambda a: a[0], tree)
    return pg.replace(**{name: squeeze(getattr(pg, name)) for name in _PART_FIELDS})


def _exchange(h, pg: PartitionedGraph, axis: str):
    """This part's rows ``h`` ([R, F]) -> the ``[num_src, F]`` rows its edges read."""
    if pg.exchange == "all_gather":
        return jax.lax.all_gather(h, axis, tiled=True)
    P_, H = pg.num_parts, pg.halo_size
    if P_ == 1 or H == 0:  # nothing is remote
        return h
    # [(P-1) * H, F]: block s-1 goes to the part s steps ahead on the ring
    send = jnp.take(h, pg.send_index, axis=0)
    # received from the part s steps behind, in the order the host planned
    blocks = [h]
    for s in range(1, P_):
        blocks.append(jax.lax.ppermute(send[(s - 1) * H:s * H], axis,
                                       perm=[(q, (q + s) % P_) for q in range(P_)]))
    return jnp.concatenate(blocks, axis=0)


def _gcn_layer(conv: GCNConv, h, pg: PartitionedGraph, axis: str):
    if conv.normalize:
        if pg.gcn_adj is None:
            raise ValueError("a GCNConv layer needs the GCN-normalised edges: build the "
                             "graph with partition_graph(..., gcn=True)")
        if not conv.add_self_loops:
            raise ValueError("GCNConv(add_self_loops=False) is not supported on a "
                             "partitioned graph (its coefficients include the loops)")
        if conv.improved != pg.gcn_improved:
            raise ValueError(f"the layer has improved={conv.improved} but the graph was "
                             f"partitioned with improved={pg.gcn_improved}")
        adj, weight = pg.gcn_adj, pg.gcn_weight
    else:
        adj, weight = pg.adj, pg.edge_weight
    # As GCNConv: transform first, so the exchange moves F_out features.
    t = apply_linear(conv.lin, h)
    out = conv.propagate(adj, (_exchange(t, pg, axis), t), edge_weight=weight)
    if conv.bias is not None:
        out = out + conv.bias[...]
    return out


def _sage_layer(conv: SAGEConv, h, pg: PartitionedGraph, axis: str):
    if (conv.lin is None and conv.aggr in ("sum", "add", "mean")
            and conv.lin_l.out_features < h.shape[1]):
        # SAGEConv's own shortcut (a linear map commutes with sum and mean),
        # taken before the exchange, so out_features rather than in_features
        # cross devices; the rest is SAGEConv.__call__'s.
        t = _exchange(as_dense(h) @ conv.lin_l.kernel[...], pg, axis)
        out = conv.propagate(pg.adj, (t, None), size=(pg.num_src, h.shape[0]))
        if conv.lin_l.bias is not None:
            out = out + conv.lin_l.bias[...]
        return conv.combine(out, h)
    return conv((_exchange(as_dense(h), pg, axis), h), pg.adj)


def _layer(conv, h, pg, axis):
    if isinstance(conv, GCNConv):
        return _gcn_layer(conv, h, pg, axis)
    if isinstance(conv, SAGEConv):
        return _sage_layer(conv, h, pg, axis)
    raise ValueError(f"model: {type(conv).__name__} is not supported on a partitioned "
                     "graph; use GCNConv or SAGEConv layers (GCN, GraphSAGE)")


def _check_model(model) -> None:
    if isinstance(model, (GCNConv, SAGEConv)):
        return
    if not isinstance(model, GNN):
        raise ValueError(f"model: {type(model).__name__} is not supported; pass a GCNConv, "
                         "a SAGEConv or a GNN of them (GCN, GraphSAGE)")
    for conv in model.convs:
        if not isinstance(conv, (GCNConv, SAGEConv)):
            raise ValueError(f"model: its {type(conv).__name__} layer is not supported on "
                             "a partitioned graph; use GCNConv or SAGEConv layers")
    if model.norm is not None:
        raise ValueError(f"model: norm={model.norm!r} needs statistics over all nodes, "
                         "which a partitioned step does not gather; use norm=None")
    if model.pool is not None:
        raise ValueError("model: a graph-level model (pool=...) is not for one big graph")
    if model.dropout is not None and not model.dropout.deterministic:
        raise ValueError("model: dropout would draw the same mask on every device; build "
                         "it with dropout=0.0 or call model.eval()")


def _local_forward(model, pg: PartitionedGraph, axis: str):
    if not isinstance(model, GNN):
        return _layer(model, pg.x, pg, axis)
    act = ACTIVATIONS[model.activation]
    x = pg.x
    for i, conv in enumerate(model.convs):
        h = _layer(conv, x, pg, axis)
        if i < model.num_hidden:
            h = act(h)
            if model.residual and h.shape == x.shape:
                h = h + as_dense(x)
        x = h
    return x if model.head is None else model.head(x)


def _run(fn, args, pg: PartitionedGraph, mesh, axis: str):
    """``fn(*args, local pg)`` on every part under ``jax.shard_map``; ``args``
    are replicated, ``pg`` split by part; returns node rows ``[P * R, ...]``."""
    _check_mesh(pg, mesh, axis)
    body = lambda args, pg_part: fn(*args, _local(pg_part))
    # check_vma=False: the CSR product (gnncore.csr_kernel, spmm's kernel)
    # does not carry shard_map's varying-axes types in jax 0.10 (its cotangent
    # comes back unvarying and the check refuses it). Unchecked, the transpose
    # still sums the replicated arguments' cotangents (the parameters'
    # gradients) over the axis; the tests compare them with one device's.
    return jax.shard_map(body, mesh=mesh, in_specs=(P(), P(axis)),
                         out_specs=P(axis), check_vma=False)(args, pg)


def forward(model, pg: PartitionedGraph, *, mesh, axis: str = AXIS):
    """The model's output for every node row of ``pg``, computed part by part.

    Equals the model on the unpartitioned graph (``pg.unpad_nodes`` of the
    result gives the rows in node order). Works eagerly and under ``jax.jit``
    / ``nnx.jit`` / ``nnx.grad``.

    Arguments:
        model: a :class:`GCNConv`, a :class:`SAGEConv`, or a :class:`GNN` of
            them (``GCN``, ``GraphSAGE``); its parameters are used replicated.
        pg: a :class:`PartitionedGraph` (placed with :func:`shard_graph`, or
            host arrays, which are then moved).
        mesh: a mesh whose axis ``axis`` has ``pg.num_parts`` devices.
        axis: the mesh axis the parts are spread over.

    Returns:
        ``[P * R, out_features]``, split over the mesh like ``pg.x``.
    """
    _check_model(model)
    graphdef, state = nnx.split(model)

    def part(state, pgl):
        return _local_forward(nnx.merge(graphdef, state), pgl, axis)

    return _run(part, (state,), pg, mesh, axis)


class _Neighbours(MessagePassing):
    """Plain aggregation of the source features (``message`` = ``x_j``)."""


def aggregate(pg: PartitionedGraph, x=None, *, mesh, aggr: str = "sum", axis: str = AXIS):
    """Aggregate each node's in-neighbours' rows of ``x`` over the partitioned
    graph (unweighted): the same as ``MessagePassing(aggr).propagate`` on the
    whole graph.

    Arguments:
        pg: a :class:`PartitionedGraph`.
        x: ``[P * R, F]`` node rows in ``pg``'s layout (``pg.pad_nodes`` makes
            them from ``[num_nodes, F]``); default ``pg.x``.
        mesh: a mesh whose axis ``axis`` has ``pg.num_parts`` devices.
        aggr: any aggregation name of :class:`MessagePassing` (``"sum"``,
            ``"mean"``, ``"max"``, ...).
        axis: the mesh axis the parts are spread over.

    Returns:
        ``[P * R, F]``, split over the mesh like ``pg.x``.
    """
    if x is None:
        x = pg.x
    if x.shape[0] != pg.padded_nodes:
        raise ValueError(f"x has {x.shape[0]} rows but the partitioned layout has "
                         f"{pg.padded_nodes} (P * R): lay it out with pg.pad_nodes(x)")
    mp = _Neighbours(aggr=aggr)
    graphdef, state = nnx.split(mp)

    def part(state, pgl):  # x travels in pg.x, split like the node arrays
        return nnx.merge(graphdef, state).propagate(
            pgl.adj, (_exchange(pgl.x, pgl, axis), None),
            size=(pgl.num_src, pgl.rows_per_part))

    return _run(part, (state,), pg.replace(x=x), mesh, axis)


def node_loss(model, pg: PartitionedGraph, *, mesh, mask: str | None = "train_mask",
              axis: str = AXIS):
    """Mean softmax cross-entropy of the model's output over the masked nodes.

    Arguments:
        model: as for :func:`forward`.
        pg: a :class:`PartitionedGraph` with labels ``y``.
        mesh: a mesh whose axis ``axis`` has ``pg.num_parts`` devices.
        mask: the name of a node mask of ``pg`` (``"train_mask"``, ``"val_mask"``,
            ``"test_mask"``), or ``None`` for every labelled node. Padding rows
            and nodes labelled -1 never count.
        axis: the mesh axis the parts are spread over.

    Returns:
        a scalar: the same as the mean over those nodes on one device.
    """
    if pg.y is None:
        raise ValueError("pg: node_loss needs labels, but the graph has no y")
    keep = pg.node_mask & (pg.y >= 0)
    if mask is not None:
        if mask not in ("train_mask", "val_mask", "test_mask"):
            raise ValueError(f"mask must be 'train_mask', 'val_mask', 'test_mask' or None; "
                             f"got {mask!r}")
        if getattr(pg, mask) is None:
            raise ValueError(f"mask={mask!r}: the graph has no {mask}")
        keep = keep & getattr(pg, mask)
    logits = forward(model, pg, mesh=mesh, axis=axis)
    logp = jax.nn.log_softmax(logits.astype(jnp.float32))
    nll = -jnp.take_along_axis(logp, jnp.maximum(pg.y, 0)[:, None], axis=1)[:, 0]
    total = jnp.sum(jnp.where(keep, nll, 0.0))
    return total / jnp.maximum(jnp.sum(keep), 1).astype(total.dtype)


def train_step(model, optimizer, pg: PartitionedGraph, *, mesh,
               mask: str | None = "train_mask", axis: str = AXIS):
    """One full-batch training step on the partitioned graph; returns the loss.

    Stateful like any NNX step: the model's parameters and the optimizer's
    state are updated in place. Wrap it in ``nnx.jit`` with the keywords bound,
    e.g. ``nnx.jit(functools.partial(train_step, mesh=mesh))``.

    Arguments:
        model: as for :func:`forward`.
        optimizer: an ``nnx.Optimizer`` over the model's parameters (the
            caller chooses the optax transformation; gnncore does not import optax).
        pg: a :class:`PartitionedGraph` with labels.
        mesh, mask, axis: as for :func:`node_loss`.
    """
    loss, grads = nnx.value_and_grad(
        lambda m: node_loss(m, pg, mesh=mesh, mask=mask, axis=axis))(model)
    optimizer.update(model, grads)
    return loss

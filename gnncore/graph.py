"""The :class:`Graph` container: arrays for one graph, with static sizes.

A ``Graph`` is a JAX pytree. Its arrays (features, edges, labels, masks) are
leaves; its node and edge counts are static metadata, so a compiled function
that takes a ``Graph`` is specialised to those sizes and never has to read them
from device memory.

Graphs are built on the host with :meth:`Graph.from_arrays` (or
:func:`from_networkx`), which validates the input and sorts the edges by target
node once, so segment reductions over targets see sorted ids.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import numpy as np

from gnncore.sparse import Adjacency
from gnncore.utils import to_device

__all__ = ["Graph", "bucket_size", "from_networkx", "to_networkx"]

_DATA_FIELDS = ("x", "edge_index", "edge_weight", "edge_attr", "y",
                "train_mask", "val_mask", "test_mask")
_PYTREE_FIELDS = _DATA_FIELDS + ("adj",)
_META_FIELDS = ("num_nodes", "num_edges", "edges_sorted")


@dataclasses.dataclass(frozen=True, eq=False)
class Graph:
    """One graph, as arrays.

    Arguments:
        x: node features ``[num_nodes, F]`` (float32) or ``None``.
        edge_index: ``[2, num_edges]`` int32; row 0 is the source, row 1 the target.
        edge_weight: ``[num_edges]`` float32 or ``None``.
        edge_attr: ``[num_edges, D]`` float32 or ``None``.
        y: ``[num_nodes]`` int32 labels (``-1`` = unlabelled) or ``None``.
        train_mask, val_mask, test_mask: ``[num_nodes]`` bool or ``None``.
        num_nodes, num_edges: static sizes.
        edges_sorted: static; True when edges are sorted by target (then source).
        adj: the same edges as an :class:`~gnncore.sparse.Adjacency` (CSR both
            ways) when they are sorted; pass ``graph.adj`` instead of
            ``graph.edge_index`` to any layer for the fused sum/mean kernel.

    Build one with :meth:`Graph.from_arrays`; the constructor itself does no
    checking, so that JAX can rebuild the pytree inside transformations.
    """

    x: Any
    edge_index: Any
    edge_weight: Any = None
    edge_attr: Any = None
    y: Any = None
    train_mask: Any = None
    val_mask: Any = None
    test_mask: Any = None
    num_nodes: int = 0
    num_edges: int = 0
    edges_sorted: bool = False
    adj: Any = None

    # ------------------------------------------------------------------ build
    @classmethod
    def from_arrays(cls, edge_index, x=None, *, num_nodes: int | None = None,
                    edge_weight=None, edge_attr=None, y=None, train_mask=None,
                    val_mask=None, test_mask=None, sort_edges: bool = True) -> Graph:
        """Validate host arrays and build a ``Graph``.

        ``num_nodes`` defaults to ``len(x)``, else to ``max(edge_index) + 1``.
        Raises ``ValueError`` naming the field for any malformed input.
        """
        ei = np.asarray(edge_index)
        if ei.size == 0:
            ei = ei.reshape(2, 0)
        if ei.ndim != 2 or ei.shape[0] != 2:
            raise ValueError(f"edge_index must have shape [2, E]; got {ei.shape}")
        if ei.dtype.kind not in "iu":
            if ei.dtype.kind == "f" and np.all(np.isfinite(ei)) and np.all(ei == np.round(ei)):
                ei = ei.astype(np.int64)
            else:
                raise ValueError(f"edge_index must hold integers; got dtype {ei.dtype}")
        xs = None if x is None else np.asarray(x, dtype=np.float32)
        if xs is not None:
            if xs.ndim == 1:
                xs = xs[:, None]
            if xs.ndim != 2:
                raise ValueError(f"x must have shape [num_nodes, F]; got {xs.shape}")
            if not np.all(np.isfinite(xs)):
                raise ValueError("x contains NaN or Inf")
        if num_nodes is None:
            if xs is not None:
                num_nodes = xs.shape[0]
            elif ei.shape[1]:
                num_nodes = int(ei.max()) + 1
            else:
                raise ValueError("num_nodes is required for a graph with no x and no edges")
        num_nodes = int(num_nodes)
        if num_nodes < 1:
            raise ValueError(f"a graph needs at least one node; num_nodes={num_nodes}")
        if xs is not None and xs.shape[0] != num_nodes:
            raise ValueError(f"x has {xs.shape[0]} rows but num_nodes={num_nodes}")
        if ei.shape[1] and (ei.min() < 0 or ei.max() >= num_nodes):
            bad = int(np.flatnonzero((ei < 0).any(0) | (ei >= num_nodes).any(0))[0])
            raise ValueError(
                f"edge_index column {bad} ({ei[0, bad]} -> {ei[1, bad]}) is out of "
                f"range for num_nodes={num_nodes}")
        num_edges = ei.shape[1]

        def edge_array(name, value, ndim):
            if value is None:
                return None
            arr = np.asarray(value, dtype=np.float32)
            if ndim == 2 and arr.ndim == 1:
                arr = arr[:, None]
            if arr.ndim != ndim or arr.shape[0] != num_edges:
                raise ValueError(f"{name} must have {num_edges} rows (one per edge); "
                                 f"got shape {arr.shape}")
            if not np.all(np.isfinite(arr)):
                raise ValueError(f"{name} contains NaN or Inf")
            return arr

        ew = edge_array("edge_weight", edge_weight, 1)
        ea = edge_array("edge_attr", edge_attr, 2)

        def node_array(name, value, dtype):
            if value is None:
                return None
            arr = np.asarray(value)
            if arr.shape != (num_nodes,):
                raise ValueError(f"{name} must have shape ({num_nodes},); got {arr.shape}")
            if dtype is np.int32:
                if arr.dtype.kind == "f":
                    if not np.all(arr == np.round(arr)):
                        raise ValueError(f"{name} must hold integer labels")
                elif arr.dtype.kind not in "iub":
                    raise ValueError(f"{name} must hold integer labels; got {arr.dtype}")
            return arr.astype(dtype)

        ys = node_array("y", y, np.int32)
        masks = {name: node_array(name, value, bool) for name, value in
                 (("train_mask", train_mask), ("val_mask", val_mask),
                  ("test_mask", test_mask))}

        if sort_edges and num_edges:
            # Sort by target, then source: deterministic, and segment ops over
            # targets touch memory in order.
            order = np.lexsort((ei[0], ei[1]))
            ei = ei[:, order]
            ew = None if ew is None else ew[order]
            ea = None if ea is None else ea[order]
        sorted_ = bool(num_edges == 0 or np.all(np.diff(ei[1] * num_nodes + ei[0]) >= 0))
        adj = Adjacency.from_edge_index(ei, num_nodes) if sorted_ else None

        def dev(a):
            return None if a is None else to_device(a)

        edge_index = to_device(ei.astype(np.int32)) if adj is None else adj.edge_index
        return cls(x=dev(xs), edge_index=edge_index,
                   edge_weight=dev(ew), edge_attr=dev(ea), y=dev(ys),
                   train_mask=dev(masks["train_mask"]), val_mask=dev(masks["val_mask"]),
                   test_mask=dev(masks["test_mask"]), num_nodes=num_nodes,
                   num_edges=num_edges, edges_sorted=sorted_, adj=adj)

    # ------------------------------------------------------------ properties
    @property
    def num_features(self) -> int:
        return 0 if self.x is None else int(self.x.shape[1])

    def num_classes(self) -> int:
        """Number of classes, ``max(y) + 1`` (host-side; not for traced graphs)."""
        if self.y is None:
            return 0
        return int(np.max(np.asarray(self.y), initial=-1)) + 1

    def pad_to(self, num_nodes: int, num_edges: int) -> Graph:
        """A copy with ``num_nodes`` nodes and ``num_edges`` edges (host-side).

        Padding nodes have zero features, label -1 and every mask False; padding
        edges are self-loops on the last padding node, so nothing flows between
        them and real nodes and results on real nodes do not change (except for
        random draws such as dropout masks, whose shapes grow). Needs at least
        one padding node when edges are added. Use it to keep shapes in a few
        buckets so that edits do not recompile.
        """
        extra_n, extra_e = num_nodes - self.num_nodes, num_edges - self.num_edges
        if extra_n < 0 or extra_e < 0:
            raise ValueError(f"cannot pad a graph of {self.num_nodes} nodes / "
                             f"{self.num_edges} edges to {num_nodes} / {num_edges}")
        if extra_e and not extra_n:
            raise ValueError("padding edges need a padding node: pass num_nodes > "
                             f"{self.num_nodes}")

        def rows(a, n, fill):
            if a is None:
                return None
            a = np.asarray(a)
            return np.concatenate([a, np.full((n,) + a.shape[1:], fill, a.dtype)])

        pad_node = num_nodes - 1
        edge_index = np.concatenate(
            [np.asarray(self.edge_index), np.full((2, extra_e), pad_node, np.int64)], axis=1)
        return Graph.from_arrays(
            edge_index, rows(self.x, extra_n, 0), num_nodes=num_nodes,
            edge_weight=rows(self.edge_weight, extra_e, 1),
            edge_attr=rows(self.edge_attr, extra_e, 0), y=rows(self.y, extra_n, -1),
            train_mask=rows(self.train_mask, extra_n, False),
            val_mask=rows(self.val_mask, extra_n, False),
            test_mask=rows(self.test_mask, extra_n, False),
            sort_edges=self.edges_sorted)

    def replace(self, **changes) -> Graph:
        """A copy with some fields replaced. No validation, and ``adj`` is not
        rebuilt: for new edges use ``from_arrays``."""
        return dataclasses.replace(self, **changes)

    def __repr__(self) -> str:
        parts = [f"num_nodes={self.num_nodes}", f"num_edges={self.num_edges}"]
        for name in _DATA_FIELDS:
            value = getattr(self, name)
            if value is not None and name != "edge_index":
                parts.append(f"{name}={list(value.shape)}")
        return f"Graph({', '.join(parts)})"

    def equals(self, other: Graph) -> bool:
        """Exact equality of sizes and every array (host-side)."""
        if not isinstance(other, Graph):
            return False
        if any(getattr(self, f) != getattr(other, f) for f in ("num_nodes", "num_edges")):
            return False
        for name in _DATA_FIELDS:
            a, b = getattr(self, name), getattr(other, name)
            if (a is None) != (b is None):
                return False
            if a is not None and (a.shape != b.shape or not np.array_equal(
                    np.asarray(a), np.asarray(b))):
                return False
        return True


jax.tree_util.register_dataclass(
    Graph, data_fields=list(_PYTREE_FIELDS), meta_fields=list(_META_FIELDS))


def bucket_size(n: int, minimum: int = 16) -> int:
    """The bucket a size falls in: the next power of two, at least ``minimum``."""
    size = max(int(minimum), 1)
    while size < n:
        size *= 2
    return size


# ---------------------------------------------------------------- networkx
def from_networkx(G, *, feature_attrs: str | list[str] | None = "x",
                  label_attr: str | None = "y", weight_attr: str | None = "weight",
                  sort_edges: bool = True) -> Graph:
    """Build a :class:`Graph` from a networkx graph.

    Node ``i`` of the result is ``list(G.nodes)[i]``. An undirected ``G`` gives
    both directions of every edge. ``feature_attrs`` names one node attribute
    holding a vector, or several holding scalars (concatenated); a missing
    attribute on every node means no features. ``label_attr`` becomes ``y``
    (missing on a node means -1), and boolean node attributes ``train_mask``,
    ``val_mask`` and ``test_mask`` are read when present. ``weight_attr`` gives
    ``edge_weight`` when every edge has it.
    """
    nodes = list(G.nodes)
    if not nodes:
        raise ValueError("the networkx graph has no nodes")
    index = {n: i for i, n in enumerate(nodes)}
    src, dst, weights = [], [], []
    for u, v, data in G.edges(data=True):
        pairs = [(u, v)] if G.is_directed() or u == v else [(u, v), (v, u)]
        for a, b in pairs:
            src.append(index[a])
            dst.append(index[b])
            weights.append(data.get(weight_attr) if weight_attr else None)
    has_w = bool(weights) and weight_attr is not None and all(w is not None for w in weights)
    node_data = [G.nodes[n] for n in nodes]

    x = None
    if isinstance(feature_attrs, str):
        feature_attrs = [feature_attrs]
    if feature_attrs:
        present = [a for a in feature_attrs if any(a in d for d in node_data)]
        if present:
            rows = []
            for n, d in zip(nodes, node_data):
                row = []
                for a in present:
                    if a not in d:
                        raise ValueError(f"node {n!r} has no attribute {a!r}")
                    row.extend(np.atleast_1d(np.asarray(d[a], dtype=np.float32)).tolist())
                rows.append(row)
            if len({len(r) for r in rows}) > 1:
                raise ValueError(f"feature attributes {present} have different lengths "
                                 "on different nodes")
            x = np.asarray(rows, dtype=np.float32)

    y = None
    if label_attr and any(label_attr in d for d in node_data):
        y = np.asarray([d.get(label_attr, -1) for d in node_data])
    masks = {}
    for name in ("train_mask", "val_mask", "test_mask"):
        if any(name in d for d in node_data):
            masks[name] = np.asarray([bool(d.get(name, False)) for d in node_data])
    return Graph.from_arrays(
        np.asarray([src, dst], dtype=np.int64).reshape(2, -1), x,
        num_nodes=len(nodes), edge_weight=np.asarray(weights, np.float32) if has_w else None,
        y=y, sort_edges=sort_edges, **masks)


def to_networkx(graph: Graph, *, undirected: bool = False):
    """Convert to a ``networkx.DiGraph`` (or ``Graph`` with ``undirected=True``).

    Nodes are ``0 .. num_nodes-1`` with attributes ``x`` (a list), ``y`` and the
    masks where present; edges carry ``weight`` and ``edge_attr`` where present.
    With ``undirected=True`` each pair of opposite edges becomes one edge.
    """
    import networkx as nx

    G = nx.Graph() if undirected else nx.DiGraph()
    x = None if graph.x is None else np.asarray(graph.x)
    y = None if graph.y is None else np.asarray(graph.y)
    masks = {name: np.asarray(getattr(graph, name)) for name in
             ("train_mask", "val_mask", "test_mask") if getattr(graph, name) is not None}
    for i in range(graph.num_nodes):
        attrs = {}
        if x is not None:
            attrs["x"] = x[i].tolist()
        if y is not None:
            attrs["y"] = int(y[i])
        for name, m in masks.items():
            attrs[name] = bool(m[i])
        G.add_node(i, **attrs)
    ei = np.asarray(graph.edge_index)
    ew = None if graph.edge_weight is None else np.asarray(graph.edge_weight)
    ea = None if graph.edge_attr is None else np.asarray(graph.edge_attr)
    for k in range(graph.num_edges):
        attrs = {}
        if ew is not None:
            attrs["weight"] = float(ew[k])
        if ea is not None:
            attrs["edge_attr"] = ea[k].tolist()
        G.add_edge(int(ei[0, k]), int(ei[1, k]), **attrs)
    return G

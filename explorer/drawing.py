"""Drawing a graph: pure editing operations, an undo history and stable layouts.

A :class:`Drawing` is immutable: every operation returns a new one, so the UI
can keep a history and undo by stepping back. Positions belong to the drawing:
layouts place only nodes that have none, so existing nodes never jump when a
node or edge is added.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import networkx as nx
import numpy as np

import gnncore
from explorer.sources import PRESETS, build_features, preset_graph, split_per_class

if TYPE_CHECKING:
    from gnncore import Graph

__all__ = ["AUTO_LAYOUT_NODES", "LAYOUTS", "MAX_NODES", "Drawing", "GraphArrays", "History",
           "from_preset"]

LAYOUTS = ("spring", "kamada_kawai", "spectral", "circular")
#: a drawing is also the data container of big graphs (files, Cora): the UI
#: draws only a subset of them
MAX_NODES = 50_000
#: ``layout="auto"`` lays out graphs up to this size; bigger ones keep no positions
AUTO_LAYOUT_NODES = 500


@dataclasses.dataclass(frozen=True, eq=False)
class GraphArrays:
    """A training-ready graph as host (numpy) arrays: what :meth:`to_graph`
    hands to :meth:`gnncore.Graph.from_arrays`, and what a page shows about the
    graph (classes, split) before JAX is loaded. ``edge_index`` holds both
    directions of an undirected edge."""

    edge_index: np.ndarray  # [2, E] int64
    x: np.ndarray  # [N, F] node features
    y: np.ndarray  # [N] int32 labels, -1 = unlabelled
    train_mask: np.ndarray  # [N] bool
    val_mask: np.ndarray
    test_mask: np.ndarray

    @property
    def num_nodes(self) -> int:
        return len(self.y)

    def num_classes(self) -> int:
        """``max(y) + 1``, as :meth:`gnncore.Graph.num_classes`."""
        return int(np.max(self.y, initial=-1)) + 1

    def to_graph(self) -> Graph:
        """The :class:`gnncore.Graph` (validated; its arrays on the device)."""
        return gnncore.Graph.from_arrays(
            self.edge_index, self.x, num_nodes=self.num_nodes, y=self.y,
            train_mask=self.train_mask, val_mask=self.val_mask, test_mask=self.test_mask)


@dataclasses.dataclass(frozen=True)
class Drawing:
    """An editable graph: node names, labels (-1 = unlabelled), positions
    (``None`` until laid out), edges as ``(source, target)`` index pairs."""

    names: tuple[str, ...] = ()
    labels: tuple[int, ...] = ()
    positions: tuple[tuple[float, float] | None, ...] = ()
    edges: tuple[tuple[int, int], ...] = ()
    directed: bool = False

    @property
    def num_nodes(self) -> int:
        return len(self.names)

    # ------------------------------------------------------------- editing
    def add_node(self, name: str | None = None, label: int = -1,
                 position: tuple[float, float] | None = None) -> Drawing:
        if self.num_nodes >= MAX_NODES:
            raise ValueError(f"a drawing holds at most {MAX_NODES} nodes")
        name = str(self.num_nodes) if name is None else str(name)
        if name in self.names:
            raise ValueError(f"a node named {name!r} already exists")
        return dataclasses.replace(
            self, names=self.names + (name,), labels=self.labels + (int(label),),
            positions=self.positions + (None if position is None else
                                        (float(position[0]), float(position[1])),))

    def remove_nodes(self, nodes) -> Drawing:
        """Remove nodes and their edges; the others are renumbered in order."""
        drop = {self._check(n) for n in nodes}
        keep = [i for i in range(self.num_nodes) if i not in drop]
        new_index = {old: new for new, old in enumerate(keep)}
        return dataclasses.replace(
            self, names=tuple(self.names[i] for i in keep),
            labels=tuple(self.labels[i] for i in keep),
            positions=tuple(self.positions[i] for i in keep),
            edges=tuple((new_index[u], new_index[v]) for u, v in self.edges
                        if u in new_index and v in new_index))

    def add_edge(self, u: int, v: int) -> Drawing:
        u, v = self._check(u), self._check(v)
        if self.has_edge(u, v):
            return self
        return dataclasses.replace(self, edges=self.edges + ((u, v),))

    def remove_edge(self, u: int, v: int) -> Drawing:
        u, v = self._check(u), self._check(v)
        return dataclasses.replace(self, edges=tuple(
            e for e in self.edges if not self._same(e, (u, v))))

    def set_label(self, nodes, label: int) -> Drawing:
        chosen = {self._check(n) for n in nodes}
        return dataclasses.replace(self, labels=tuple(
            int(label) if i in chosen else lab for i, lab in enumerate(self.labels)))

    def move_nodes(self, positions) -> Drawing:
        """Place nodes: ``positions`` maps node index → ``(x, y)`` (finite)."""
        moved = list(self.positions)
        for node, (x, y) in dict(positions).items():
            x, y = float(x), float(y)
            if not (np.isfinite(x) and np.isfinite(y)):
                raise ValueError(f"node {self.names[self._check(node)]}: position must be finite")
            moved[self._check(node)] = (x, y)
        return dataclasses.replace(self, positions=tuple(moved))

    @property
    def structure(self) -> tuple:
        """Everything but the positions: what training sees. Two drawings with
        the same structure build the same graph (a move is not an edit of it)."""
        return (self.names, self.labels, self.edges, self.directed)

    def set_directed(self, directed: bool) -> Drawing:
        return dataclasses.replace(self, directed=bool(directed))

    def clear(self) -> Drawing:
        return Drawing(directed=self.directed)

    def has_edge(self, u: int, v: int) -> bool:
        return any(self._same(e, (u, v)) for e in self.edges)

    def _same(self, a, b) -> bool:
        return a == b or (not self.directed and a == (b[1], b[0]))

    def _check(self, node) -> int:
        node = int(node)
        if not 0 <= node < self.num_nodes:
            raise ValueError(f"no node {node}: the drawing has {self.num_nodes} nodes")
        return node

    # -------------------------------------------------------------- layout
    def to_networkx(self) -> nx.Graph:
        G = nx.DiGraph() if self.directed else nx.Graph()
        G.add_nodes_from(range(self.num_nodes))
        G.add_edges_from(self.edges)
        return G

    def layout(self, method: str = "spring", *, seed: int = 0) -> Drawing:
        """Give every node without a position one; placed nodes stay where they
        are. ``spring`` relaxes the new nodes around the fixed ones; the other
        methods compute a full layout and take only the new nodes' positions."""
        if method not in LAYOUTS:
            raise ValueError(f"unknown layout {method!r}; choose one of {LAYOUTS}")
        missing = [i for i, p in enumerate(self.positions) if p is None]
        if not missing:
            return self
        G = self.to_networkx().to_undirected()
        placed = {i: p for i, p in enumerate(self.positions) if p is not None}
        if method == "spring":
            pos = nx.spring_layout(G, pos=placed or None, fixed=list(placed) or None,
                                   seed=seed)
        elif method == "kamada_kawai":
            pos = nx.kamada_kawai_layout(G) if G.number_of_nodes() > 1 else {0: (0.0, 0.0)}
        elif method == "spectral":
            pos = nx.spectral_layout(G) if G.number_of_nodes() > 2 else nx.circular_layout(G)
        else:
            pos = nx.circular_layout(G)
        positions = list(self.positions)
        for i in missing:
            positions[i] = (float(pos[i][0]), float(pos[i][1]))
        return dataclasses.replace(self, positions=tuple(positions))

    # ------------------------------------------------------------ training
    def to_graph(self, *, features: str = "one_hot", seed: int = 0,
                 train_per_class: int = 1, x: np.ndarray | None = None,
                 split=None) -> Graph:
        """The drawing as a training-ready :class:`gnncore.Graph`; an undirected
        edge becomes both directions. ``x`` (one row per node) replaces the
        built ``features``; ``split`` (``(train, val, test)`` bool masks, one
        entry per node, e.g. a file's public split) replaces the seeded
        ``train_per_class`` split."""
        return self.to_arrays(features=features, seed=seed, train_per_class=train_per_class,
                              x=x, split=split).to_graph()

    def to_arrays(self, *, features: str = "one_hot", seed: int = 0,
                  train_per_class: int = 1, x: np.ndarray | None = None,
                  split=None) -> GraphArrays:
        """What :meth:`to_graph` builds, as host arrays (no JAX)."""
        if not self.num_nodes:
            raise ValueError("the drawing has no nodes")
        pairs = list(self.edges)
        if not self.directed:
            pairs += [(v, u) for u, v in self.edges if u != v]
        edge_index = np.asarray(pairs, np.int64).T.reshape(2, -1)
        labels = np.asarray(self.labels, np.int32)
        if split is None:
            train, val, test = split_per_class(labels, train_per_class, seed)
        else:
            train, val, test = self._check_split(split)
        if x is None:
            x = build_features(self.to_networkx(), features, seed=seed)
        elif len(x) != self.num_nodes:
            raise ValueError(f"x has {len(x)} rows for {self.num_nodes} nodes")
        return GraphArrays(edge_index, x, labels, np.asarray(train), np.asarray(val),
                           np.asarray(test))

    def _check_split(self, split) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if not isinstance(split, (tuple, list)) or len(split) != 3:
            raise ValueError("split must be three masks (train, val, test)")
        masks = tuple(np.asarray(m) for m in split)
        for part, mask in zip(("train", "val", "test"), masks):
            if mask.shape != (self.num_nodes,):
                raise ValueError(f"split: the {part} mask has shape {list(mask.shape)} for "
                                 f"{self.num_nodes} nodes")
            if mask.dtype != bool:
                raise ValueError(f"split: the {part} mask must be bool, got {mask.dtype}")
        if (masks[0].astype(int) + masks[1] + masks[2]).max() > 1:
            raise ValueError("split: a node is in more than one of train, val and test")
        return masks


def from_preset(name: str, *, seed: int = 0, difficulty: float = 0.0,
                layout: str | None = "auto") -> Drawing:
    """A preset as a drawing (names from the networkx nodes).

    ``layout``: a name from :data:`LAYOUTS`, ``None`` (positions stay
    ``None``) or ``auto``: ``spring``, except for the file-backed presets (Cora,
    CiteSeer: thousands of nodes) and graphs over :data:`AUTO_LAYOUT_NODES`
    nodes, which get no positions (the UI lays out the part it shows)."""
    G, labels = preset_graph(name, seed=seed, difficulty=difficulty)
    if layout == "auto":
        big = PRESETS[name].file is not None or G.number_of_nodes() > AUTO_LAYOUT_NODES
        layout = None if big else "spring"
    index = {n: i for i, n in enumerate(G)}
    drawing = Drawing(names=tuple(str(n) for n in G), labels=tuple(int(v) for v in labels),
                      positions=(None,) * G.number_of_nodes(),
                      edges=tuple((index[u], index[v]) for u, v in G.edges()),
                      directed=G.is_directed())
    return drawing if layout is None else drawing.layout(layout, seed=seed)


class History:
    """Undo and redo for drawings: ``push`` each new state (which drops any
    redo), ``undo`` steps back, ``redo`` forward again. Keeps at most ``limit``
    states (the oldest are dropped). ``len`` counts the states up to the
    current one, so ``len(history) > 1`` means there is something to undo."""

    def __init__(self, initial: Drawing, limit: int = 100):
        self._states = [initial]
        self._at = 0  # index of the current state; states after it can be redone
        self.limit = limit

    @property
    def current(self) -> Drawing:
        return self._states[self._at]

    @property
    def can_undo(self) -> bool:
        return self._at > 0

    @property
    def can_redo(self) -> bool:
        return self._at < len(self._states) - 1

    def push(self, drawing: Drawing) -> Drawing:
        if drawing != self.current:
            del self._states[self._at + 1:]
            self._states.append(drawing)
            del self._states[:-self.limit]
            self._at = len(self._states) - 1
        return drawing

    def undo(self) -> Drawing:
        if self.can_undo:
            self._at -= 1
        return self.current

    def redo(self) -> Drawing:
        if self.can_redo:
            self._at += 1
        return self.current

    def __len__(self) -> int:
        return self._at + 1

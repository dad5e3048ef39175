"""The graph being drawn: its drawing with undo, where it came from, what a
file brought with it, and the canvas's selection and view.

One :class:`Editor` per loaded graph: loading another graph (a preset, a file,
a link, a dataset) makes a new editor, so nothing of the old graph (its file's
features, its selection, its cached training graph) can leak into the new one.
Every editing operation returns the new :class:`Drawing` and a description of
the edit; :class:`explorer.workspace.Workspace` pushes it (one undo step) and
carries the run over.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from explorer.config import RunConfig
from explorer.drawing import (
    AUTO_LAYOUT_NODES,
    LAYOUTS,
    Drawing,
    GraphArrays,
    History,
    from_preset,
)
from explorer.graphio import MAX_LABEL
from explorer.sources import PRESETS, GraphSource, community_labels, preset_file

if TYPE_CHECKING:
    from gnncore import Graph

__all__ = ["Editor", "FileData", "GraphStats", "from_file", "open_graph"]


@dataclasses.dataclass(frozen=True)
class GraphStats:
    nodes: int
    edges: int  # undirected graphs count each edge once
    classes: int
    density: float
    directed: bool
    labelled: int


@dataclasses.dataclass(frozen=True)
class FileData:
    """What a graph file brings besides its drawing: node features and a
    train/val/test split, by node name (nodes drawn later have neither)."""

    index: Mapping[str, int]
    features: np.ndarray | None
    split: tuple[np.ndarray, np.ndarray, np.ndarray] | None


def open_graph(config: RunConfig, *, picked: bool) -> tuple[Editor, RunConfig]:
    """An editor of the preset or dataset ``config.graph`` names (with its
    file's features and split where it ships one), and ``config`` with node
    features the graph can use. ``picked``: the person chose this graph just
    now, so a graph with features of its own starts with them; otherwise (a
    link, a new session) the config's choice stands where it can."""
    name = config.graph
    if not config.task.editable:  # a dataset: its graphs are shown one at a time
        return Editor(Drawing(), GraphSource("dataset", name)), config
    source = GraphSource("preset", name)
    gf = preset_file(name)
    if gf is not None:
        drawing, data, _ = from_file(gf, config.seed)
        features = config.features
        if data.features is not None and picked:
            features = PRESETS[name].default_features
        elif data.features is None and features == "file":
            features = "one_hot"
        return Editor(drawing, source, data), config.replace(features=features)
    if config.features == "file":  # no features of its own
        config = config.replace(features=PRESETS[name].default_features)
    drawing = from_preset(name, seed=config.seed, difficulty=config.difficulty)
    return Editor(drawing, source), config


def from_file(gf, seed: int) -> tuple[Drawing, FileData, list[str]]:
    """A loaded graph file as ``(drawing, its features and split, warnings)``.
    Big graphs are not laid out here: the canvas lays out what it shows."""
    drawing = gf.to_drawing(seed=seed)
    warnings = list(gf.warnings)
    if gf.labels is None or not np.any(np.asarray(gf.labels) >= 0):
        labels = community_labels(drawing.to_networkx(), MAX_LABEL + 1)
        drawing = dataclasses.replace(drawing, labels=tuple(labels.tolist()))
        warnings.append("the file has no labels: nodes are labelled by community")
    features = None if gf.features is None else np.asarray(gf.features, np.float32)
    split = None if gf.split is None else tuple(np.asarray(m, bool) for m in gf.split)
    index = {name: i for i, name in enumerate(gf.names)}
    return drawing, FileData(index, features, split), warnings


class Editor:
    """A drawing with undo (:class:`History`), its :class:`GraphSource`, the
    file's own features and split (:class:`FileData`, or ``None``), the
    canvas selection, a big graph's view positions and, for a dataset, the
    graph on show (``sample``).

    Arguments:
        drawing: the graph as loaded.
        source: where it came from.
        file_data: what its file brought besides the drawing.
    """

    def __init__(self, drawing: Drawing, source: GraphSource,
                 file_data: FileData | None = None):
        self.history = History(drawing)
        self.source = source
        self.file_data = file_data
        self.selected: tuple[int, ...] = ()  # nodes selected on the canvas
        self.view_positions: dict[str, tuple[float, float]] = {}  # big-graph view layout
        self.sample = 0  # the dataset graph on show (graph-classification datasets)
        self._arrays: tuple[tuple, GraphArrays | None] | None = None  # (key, host arrays)
        self._graph: tuple[GraphArrays, Graph] | None = None  # (its arrays, training graph)

    @classmethod
    def for_sample(cls, graph: Graph, label: int, index: int,
                   source: GraphSource) -> Editor:
        """An editor showing graph ``index`` of a dataset (labelled ``label``;
        shown, not edited)."""
        ei = np.asarray(graph.edge_index)
        keep = ei[0] < ei[1]  # each undirected edge once
        n = graph.num_nodes
        drawing = Drawing(names=tuple(str(i) for i in range(n)), labels=(label,) * n,
                          positions=(None,) * n, edges=tuple(map(tuple, ei[:, keep].T.tolist())))
        editor = cls(drawing.layout("kamada_kawai"), source)
        editor.sample = index
        return editor

    @property
    def drawing(self) -> Drawing:
        return self.history.current

    @property
    def has_file_features(self) -> bool:
        return self.file_data is not None and self.file_data.features is not None

    # ------------------------------------------------------------ the graph
    def graph(self, config: RunConfig) -> Graph | None:
        """The drawing as a training-ready graph with ``config``'s features and
        split (``None`` when it has no nodes). Built again only when the
        drawing's structure or one of those settings changed (an editor's
        file data never changes)."""
        arrays = self.arrays(config)
        if arrays is None:
            return None
        if self._graph is None or self._graph[0] is not arrays:
            self._graph = (arrays, arrays.to_graph())
        return self._graph[1]

    def arrays(self, config: RunConfig) -> GraphArrays | None:
        """:meth:`graph` as host arrays (what a page shows about the graph:
        classes, split), built without JAX; kept as long as :meth:`graph`'s."""
        key = (self.drawing.structure, config.features, config.seed, config.train_per_class)
        if self._arrays is None or self._arrays[0] != key:
            self._arrays = (key, self._build_arrays(config))
        return self._arrays[1]

    def _build_arrays(self, config: RunConfig) -> GraphArrays | None:
        drawing = self.drawing
        if not drawing.num_nodes:
            return None
        x = split = None
        data = self.file_data
        if config.features == "file" and not self.has_file_features:
            raise ValueError("features 'file': this graph has no node features of its own")
        if data is not None:
            rows = np.asarray([data.index.get(name, -1) for name in drawing.names])
            known = rows >= 0  # nodes drawn after loading have no row of the file
            if config.features == "file":
                x = np.where(known[:, None], data.features[np.maximum(rows, 0)], 0.0
                             ).astype(np.float32)
            if data.split is not None:
                split = tuple(np.where(known, mask[np.maximum(rows, 0)], False)
                              for mask in data.split)
        return drawing.to_arrays(features=config.features, seed=config.seed,
                                 train_per_class=config.train_per_class, x=x, split=split)

    def stats(self) -> GraphStats:
        d = self.drawing
        n, e = d.num_nodes, len(d.edges)
        pairs = n * (n - 1) if d.directed else n * (n - 1) / 2
        labels = [v for v in d.labels if v >= 0]
        return GraphStats(nodes=n, edges=e, classes=len(set(labels)),
                          density=e / pairs if pairs else 0.0, directed=d.directed,
                          labelled=len(labels))

    # ------------------------------------------------------------- history
    def push(self, drawing: Drawing) -> Drawing:
        """Make ``drawing`` current (one undo step); returns the one before."""
        before = self.drawing
        self.history.push(drawing)
        return before

    def undo(self) -> Drawing | None:
        """Step back; returns the drawing before, or ``None`` if nothing changed."""
        before = self.drawing
        self.history.undo()
        return before if self.drawing != before else None

    def redo(self) -> Drawing | None:
        before = self.drawing
        self.history.redo()
        return before if self.drawing != before else None

    def follow_selection(self, before: Drawing) -> None:
        """Keep the same nodes selected after an edit that renumbered them."""
        d = self.drawing
        if d.names != before.names:  # indices may now mean other nodes
            keep = {name: i for i, name in enumerate(d.names)}
            self.selected = tuple(sorted(keep[before.names[i]] for i in self.selected
                                         if i < before.num_nodes and before.names[i] in keep))

    def select(self, nodes: Sequence[int]) -> None:
        """The canvas selection (node indices); buttons act on it."""
        n = self.drawing.num_nodes
        self.selected = tuple(sorted({int(i) for i in nodes if 0 <= int(i) < n}))

    # ------------------------------------------------------------- editing
    # Each returns ``(new drawing, what the edit did)``; nothing changes here.
    def with_node(self, label: int = -1,
                  position: tuple[float, float] | None = None) -> tuple[Drawing, str]:
        """A node at ``position`` (a double-click on the canvas) or, without
        one, at a free spot next to the others; no other node moves."""
        d = self.drawing
        free = position if position is not None else _free_spot(d)
        # a name the file never used: a new node must not inherit a deleted node's
        # features or split (they are looked up by name)
        name = _fresh_name(d, self.file_data.index if self.file_data else ())
        return d.add_node(name, label=label, position=free), f"added node {name}"

    def with_edge(self, u: int, v: int) -> tuple[Drawing, str]:
        d = self.drawing
        u, v = d._check(u), d._check(v)
        if d.has_edge(u, v):
            raise ValueError(f"nodes {d.names[u]} and {d.names[v]} are already connected")
        return d.add_edge(u, v), f"connected {d.names[u]} and {d.names[v]}"

    def without_edge(self, selected: Sequence[int]) -> tuple[Drawing, str]:
        nodes = sorted(set(selected))
        if len(nodes) != 2 or not self.drawing.has_edge(*nodes):
            raise ValueError("select the two end nodes of an existing edge")
        return self.drawing.remove_edge(*nodes), "removed an edge"

    def without(self, selected: Sequence[int],
                edges: Sequence[tuple[int, int]] = ()) -> tuple[Drawing, str]:
        """Nodes (with their edges) and edges deleted, as one edit."""
        nodes = sorted(set(selected))
        if not nodes and not edges:
            raise ValueError("select nodes or edges to delete first")
        d = self.drawing
        for u, v in edges:
            d = d.remove_edge(u, v)
        d = d.remove_nodes(nodes) if nodes else d
        parts = [f"{len(nodes)} node(s)" if nodes else "",
                 f"{len(edges)} edge(s)" if edges else ""]
        return d, "deleted " + " and ".join(p for p in parts if p)

    def moved(self, positions: Mapping[int, tuple[float, float]]) -> tuple[Drawing, str]:
        return self.drawing.move_nodes(positions), f"moved {len(positions)} node(s)"

    def labelled(self, selected: Sequence[int], label: int) -> tuple[Drawing, str]:
        nodes = sorted(set(selected))
        if not nodes:
            raise ValueError("select nodes to label first")
        if not -1 <= int(label) <= MAX_LABEL:
            raise ValueError(f"label must be from -1 (unlabelled) to {MAX_LABEL}")
        return (self.drawing.set_label(nodes, int(label)),
                f"labelled {len(nodes)} node(s) {int(label)}")

    def with_edges(self, rows: Sequence[tuple[str, str]]) -> tuple[Drawing, str]:
        """The edges replaced by ``(source name, target name)`` rows (the edge
        table). A bad row raises ``ValueError`` naming it."""
        index = {name: i for i, name in enumerate(self.drawing.names)}
        d = dataclasses.replace(self.drawing, edges=())
        for row, (u, v) in enumerate(rows, start=1):
            u, v = ("" if u is None else str(u).strip(), "" if v is None else str(v).strip())
            if not u and not v:
                continue  # a blank row the editor added
            for end, name in (("source", u), ("target", v)):
                if name not in index:
                    raise ValueError(f"edge table row {row}, {end}: no node named {name!r}")
            d = d.add_edge(index[u], index[v])
        added = len(d.edges) - len(self.drawing.edges)
        return d, f"edge table: {added:+d} edge(s)"

    def relaid_out(self, method: str, seed: int) -> tuple[Drawing, str] | None:
        """Every node laid out afresh; ``None`` for a graph too big to lay out
        here (then the canvas lays out the nodes it shows: the view resets)."""
        if method not in LAYOUTS:
            raise ValueError(f"unknown layout {method!r}; choose one of {LAYOUTS}")
        d = self.drawing
        if d.num_nodes > AUTO_LAYOUT_NODES:
            self.view_positions = {}
            return None
        d = dataclasses.replace(d, positions=(None,) * d.num_nodes)
        return d.layout(method, seed=seed), f"re-laid out ({method})"


def _fresh_name(drawing: Drawing, taken=()) -> str:
    """The smallest number from the node count up not used as a node name (nor
    in ``taken``)."""
    used = set(drawing.names) | set(taken)
    n = drawing.num_nodes
    while str(n) in used:
        n += 1
    return str(n)


def _free_spot(drawing: Drawing) -> tuple[float, float]:
    """A place for a new node near the middle of the drawing that keeps clear of
    the others (a spiral outwards from the centre); nothing else moves."""
    placed = np.asarray([p for p in drawing.positions if p is not None], float).reshape(-1, 2)
    if not len(placed):
        return (0.0, 0.0)
    centre = placed.mean(axis=0)
    span = float(np.ptp(placed, axis=0).max()) or 1.0
    gap = span / max(4.0, np.sqrt(len(placed)) * 1.5)
    for k in range(1, 400):
        angle, radius = 2.399963 * k, gap * np.sqrt(k) * 0.8  # golden-angle spiral
        spot = centre + radius * np.array([np.cos(angle), np.sin(angle)])
        if np.min(np.linalg.norm(placed - spot, axis=1)) >= gap:
            return (float(spot[0]), float(spot[1]))
    return (float(centre[0] + span / 2 + gap), float(centre[1]))

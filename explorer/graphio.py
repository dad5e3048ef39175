"""Graph files: strict import and export.

Every bad input raises :class:`GraphFileError` whose message names the file,
the line or field, and what is wrong; nothing else escapes the loaders. Sizes
are capped before anything large is built. Never pickle, never eval.

Formats (by extension): ``.edgelist``/``.txt`` (whitespace separated
``source target [weight]``, ``#`` comments), ``.csv`` (header
``source,target[,weight]``; an optional node CSV ``id,label,feature...``),
``.json`` (networkx node-link), ``.npz`` (the schema of ``assets/cora.npz``,
see ``assets/README.md``; loaded with ``allow_pickle=False``), ``.graphml`` and
``.gml`` (through networkx; GraphML with a DOCTYPE or entity declaration is
refused before parsing, so no entity is ever expanded). There the integer node
attribute ``y`` is the class label (GML uses ``label`` for node names).

A file may carry a train/val/test split (:attr:`GraphFile.split`): the
``train_mask``/``val_mask``/``test_mask`` arrays of an ``.npz`` (bool, or
integers 0/1), a ``split`` column (``train``, ``val``, ``test`` or empty) or
``train_mask``/``val_mask``/``test_mask`` columns (0/1/true/false) of a node
CSV, and a ``split`` node attribute (same values) in node-link JSON, GraphML
and GML. A node belongs to at most one split; the exporters write the split
back wherever the format has a place for it.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
import zipfile
from pathlib import Path

import numpy as np

from gnncore import Graph

__all__ = ["FORMATS", "SPLITS", "GraphFile", "GraphFileError", "Limits", "export_graph",
           "export_node_csv", "load_graph_file"]

FORMATS = {".edgelist": "edgelist", ".txt": "edgelist", ".csv": "csv", ".json": "json",
           ".npz": "npz", ".graphml": "graphml", ".gml": "gml"}


#: the split names, in the order of :attr:`GraphFile.split`
SPLITS = ("train", "val", "test")
_MASK_FIELDS = ("train_mask", "val_mask", "test_mask")


class GraphFileError(ValueError):
    """A graph file that cannot be used; the message says where and why."""


@dataclasses.dataclass(frozen=True)
class Limits:
    max_bytes: int = 20 * 1024 * 1024
    max_nodes: int = 50_000
    max_edges: int = 500_000


@dataclasses.dataclass(frozen=True, eq=False)
class GraphFile:
    """What a file holds: node names (display), edges as indices, optional
    weights, labels (-1 = unlabelled), optional features, direction, the
    warnings raised while reading (duplicates, self loops) and the file's own
    ``split``: ``(train, val, test)`` bool masks with one entry per node (a
    node in at most one of them), or ``None`` when the file has none."""

    names: tuple[str, ...]
    edge_index: np.ndarray  # int64 [2, E]
    weights: np.ndarray | None = None
    labels: np.ndarray | None = None
    features: np.ndarray | None = None
    directed: bool = False
    warnings: tuple[str, ...] = ()
    split: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    def __post_init__(self):
        if self.split is not None:
            object.__setattr__(self, "split", _check_split(self.split, self.names, "split"))

    @property
    def num_nodes(self) -> int:
        return len(self.names)

    def split_of(self, node: int) -> str:
        """``train``, ``val``, ``test`` or ``""`` (no split) for node ``node``."""
        if self.split is None:
            return ""
        return next((s for s, mask in zip(SPLITS, self.split) if mask[node]), "")

    def _edge_set(self) -> np.ndarray:
        """Edges (with weights) in a canonical order: formats such as GML list
        edges in their own order, and undirected edges in either orientation."""
        ei = self.edge_index if self.directed else np.sort(self.edge_index, axis=0)
        w = np.zeros(ei.shape[1]) if self.weights is None else self.weights
        rows = np.column_stack([ei.T, w]) if ei.size else np.zeros((0, 3))
        return rows[np.lexsort(rows.T[::-1])] if len(rows) else rows

    def equals(self, other: GraphFile) -> bool:
        """Same graph: names, direction, edge set with weights, labels, features
        and split."""
        def same(a, b):
            return (a is None and b is None) or (
                a is not None and b is not None and np.array_equal(np.asarray(a), np.asarray(b)))
        return (self.names == other.names and self.directed == other.directed
                and (self.weights is None) == (other.weights is None)
                and np.array_equal(self._edge_set(), other._edge_set())
                and same(self.labels, other.labels) and same(self.features, other.features)
                and same(self.split, other.split))

    def to_networkx(self):
        import networkx as nx

        G = nx.DiGraph() if self.directed else nx.Graph()
        G.add_nodes_from(range(self.num_nodes))
        G.add_edges_from(self.edge_index.T.tolist())
        return G

    def to_graph(self, *, features: str = "file", labels: str = "file", seed: int = 0,
                 train_per_class: int = 20) -> Graph:
        """As a :class:`gnncore.Graph` (undirected edges in both directions).

        ``features``: ``file`` (the file's own; one-hot ids if it has none) or a
        kind from ``explorer.sources.FEATURES``. ``labels``: ``file`` or
        ``community`` (greedy modularity). The file's :attr:`split` is used when
        it has one; otherwise a seeded split of ``train_per_class`` training
        nodes per class (:func:`explorer.sources.split_per_class`).
        """
        from explorer.sources import FEATURES, build_features, split_per_class

        ei, w = self.edge_index, self.weights
        if not self.directed:
            loops = ei[0] == ei[1]
            ei = np.concatenate([ei, ei[::-1, ~loops]], axis=1)
            w = None if w is None else np.concatenate([w, w[~loops]])
        if features == "file":
            x = self.features if self.features is not None else np.eye(
                self.num_nodes, dtype=np.float32)
        elif features in FEATURES:
            x = build_features(self.to_networkx(), features, seed=seed)
        else:
            raise GraphFileError(f"features: choose 'file' or one of {FEATURES}")
        if labels == "file":
            y = (self.labels if self.labels is not None
                 else np.full(self.num_nodes, -1, np.int32))
        elif labels == "community":
            import networkx as nx

            y = np.full(self.num_nodes, -1, np.int32)
            parts = nx.community.greedy_modularity_communities(self.to_networkx().to_undirected())
            for c, members in enumerate(parts):
                y[list(members)] = c
        else:
            raise GraphFileError("labels: choose 'file' or 'community'")
        train, val, test = (self.split if self.split is not None
                            else split_per_class(y, train_per_class, seed))
        return Graph.from_arrays(ei, x, num_nodes=self.num_nodes, edge_weight=w, y=y,
                                 train_mask=train, val_mask=val, test_mask=test)

    def to_drawing(self, *, layout: str | None = "auto", seed: int = 0):
        """What the UI draws: an :class:`explorer.drawing.Drawing`.

        ``layout``: a name from ``explorer.drawing.LAYOUTS``, ``None`` (every
        position stays ``None``) or ``auto``: ``spring`` for graphs of at most
        ``explorer.drawing.AUTO_LAYOUT_NODES`` (500) nodes, no positions for
        larger ones (a spring layout of thousands of nodes takes minutes; the
        UI lays out the subset it shows). Name a layout to force one.
        """
        from explorer.drawing import AUTO_LAYOUT_NODES, MAX_NODES, Drawing

        if self.num_nodes > MAX_NODES:
            raise GraphFileError(f"{self.num_nodes} nodes is too many to draw "
                                 f"(at most {MAX_NODES}); train on it without drawing")
        if layout == "auto":
            layout = "spring" if self.num_nodes <= AUTO_LAYOUT_NODES else None
        labels = self.labels if self.labels is not None else np.full(self.num_nodes, -1)
        drawing = Drawing(names=self.names, labels=tuple(int(v) for v in labels),
                          positions=(None,) * self.num_nodes,
                          edges=tuple(map(tuple, self.edge_index.T.tolist())),
                          directed=self.directed)
        return drawing if layout is None else drawing.layout(layout, seed=seed)


def _check_split(split, names, where: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``split`` as three disjoint bool masks over ``names``; raises
    :class:`GraphFileError` naming ``where`` otherwise."""
    if not isinstance(split, (tuple, list)) or len(split) != 3:
        raise GraphFileError(f"{where}: expected three masks (train, val, test)")
    masks = []
    for part, mask in zip(SPLITS, split):
        mask = np.asarray(mask)
        if mask.shape != (len(names),):
            raise GraphFileError(f"{where}: the {part} mask has shape {list(mask.shape)} "
                                 f"for {len(names)} nodes")
        if mask.dtype != bool and not (mask.dtype.kind in "iu" and np.isin(mask, (0, 1)).all()):
            raise GraphFileError(f"{where}: the {part} mask must be bool, got {mask.dtype}")
        masks.append(mask.astype(bool))
    for a, b in ((0, 1), (0, 2), (1, 2)):
        both = np.flatnonzero(masks[a] & masks[b])
        if both.size:
            raise GraphFileError(f"{where}: node {names[both[0]]!r} is in both {SPLITS[a]} "
                                 f"and {SPLITS[b]} ({both.size} nodes in both)")
    return tuple(masks)


def _split_value(value, where: str) -> int:
    """Index into :data:`SPLITS` of a ``split`` value, or -1 for none."""
    if value is None:
        return -1
    text = value.strip().lower() if isinstance(value, str) else None
    if text == "":
        return -1
    if text not in SPLITS:
        raise GraphFileError(f"{where}: field 'split': {value!r} is not train, val, test "
                             "or empty")
    return SPLITS.index(text)


def _split_from_parts(parts: list[int]):
    """Masks from one split index per node (-1: none); ``None`` if no node has one."""
    parts = np.asarray(parts, np.int64).reshape(-1)
    if not (parts >= 0).any():
        return None
    return tuple(parts == k for k in range(3))


# ------------------------------------------------------------------ reading
def load_graph_file(path, data: bytes | None = None, *, limits: Limits = Limits(),
                    node_csv: bytes | None = None, drop_duplicates: bool = False,
                    drop_self_loops: bool = False) -> GraphFile:
    """Read a graph file (``data`` given: its bytes, e.g. an upload named ``path``)."""
    name = Path(str(path)).name
    fmt = FORMATS.get(Path(name).suffix.lower())
    if fmt is None:
        raise GraphFileError(f"{name}: unknown extension; use one of {sorted(FORMATS)}")
    if data is None:
        try:
            size = Path(path).stat().st_size
            if size > limits.max_bytes:
                raise GraphFileError(f"{name}: {size} bytes is over the limit of "
                                     f"{limits.max_bytes}")
            data = Path(path).read_bytes()
        except OSError as err:
            raise GraphFileError(f"{name}: cannot read: {err.strerror}") from None
    if len(data) > limits.max_bytes:
        raise GraphFileError(f"{name}: {len(data)} bytes is over the limit of {limits.max_bytes}")
    if not data.strip():
        raise GraphFileError(f"{name}: the file is empty")
    try:
        if fmt == "npz":
            result = _read_npz(name, data, limits)
        else:
            text = _text(name, data)
            reader = {"edgelist": _read_edgelist, "csv": _read_csv, "json": _read_json,
                      "graphml": _read_graphml, "gml": _read_gml}[fmt]
            result = reader(name, text, limits)
            if node_csv is not None:
                result = _apply_node_csv(result, name, _text("node CSV", node_csv))
    except GraphFileError:
        raise
    except Exception as err:  # a bug in a reader must still not leak a traceback
        raise GraphFileError(f"{name}: could not be read ({type(err).__name__})") from None
    return _clean(result, name, drop_duplicates, drop_self_loops)


def _text(name: str, data: bytes) -> str:
    if b"\x00" in data:
        raise GraphFileError(f"{name}: binary data, not a text graph file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise GraphFileError(f"{name}: not UTF-8 text (byte {err.start})") from None


def _number(text: str, where: str, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise GraphFileError(f"{where}: {what} {text!r} is not a number") from None
    if not math.isfinite(value):
        raise GraphFileError(f"{where}: {what} is {text}; NaN and Inf are not allowed")
    return value


class _Nodes:
    """Maps node ids (as written in the file) to indices, in order of appearance."""

    def __init__(self, name: str, limits: Limits):
        self.index: dict[str, int] = {}
        self.name, self.limits = name, limits

    def __call__(self, key: str, where: str) -> int:
        if key not in self.index:
            if len(self.index) >= self.limits.max_nodes:
                raise GraphFileError(f"{where}: more than {self.limits.max_nodes} nodes")
            self.index[key] = len(self.index)
        return self.index[key]


def _finish(name, nodes, src, dst, weights, limits, **extra) -> GraphFile:
    if not nodes.index:
        raise GraphFileError(f"{name}: the graph has no nodes")
    ei = np.asarray([src, dst], np.int64).reshape(2, -1)
    w = None if weights is None else np.asarray(weights, np.float32)
    return GraphFile(names=tuple(nodes.index), edge_index=ei, weights=w, **extra)


def _read_edgelist(name: str, text: str, limits: Limits) -> GraphFile:
    nodes, src, dst, weights = _Nodes(name, limits), [], [], []
    has_weight = None
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        where = f"{name} line {number}"
        parts = line.split()
        if len(parts) < 2:
            raise GraphFileError(f"{where}: needs 'source target [weight]', got {line!r}")
        if len(parts) > 3:
            raise GraphFileError(f"{where}: too many columns ({len(parts)}); expected 2 or 3")
        if has_weight is None:
            has_weight = len(parts) == 3
        elif has_weight != (len(parts) == 3):
            raise GraphFileError(f"{where}: {len(parts)} columns, but earlier lines had "
                                 f"{3 if has_weight else 2}")
        if len(src) >= limits.max_edges:
            raise GraphFileError(f"{where}: more than {limits.max_edges} edges")
        src.append(nodes(parts[0], where))
        dst.append(nodes(parts[1], where))
        if has_weight:
            weights.append(_number(parts[2], where, "weight"))
    return _finish(name, nodes, src, dst, weights if has_weight else None, limits)


def _read_csv(name: str, text: str, limits: Limits) -> GraphFile:
    rows = csv.reader(io.StringIO(text))
    try:
        header = [h.strip().lower() for h in next(rows)]
    except StopIteration:
        raise GraphFileError(f"{name}: the file is empty") from None
    if header[:2] != ["source", "target"] or len(header) > 3 or (
            len(header) == 3 and header[2] != "weight"):
        raise GraphFileError(f"{name} line 1: header must be 'source,target[,weight]', got "
                             f"{','.join(header)!r}")
    nodes, src, dst, weights = _Nodes(name, limits), [], [], []
    for number, row in enumerate(rows, 2):
        if not row or all(not c.strip() for c in row):
            continue
        where = f"{name} line {number}"
        if len(row) != len(header):
            raise GraphFileError(f"{where}: {len(row)} columns, expected {len(header)}")
        if len(src) >= limits.max_edges:
            raise GraphFileError(f"{where}: more than {limits.max_edges} edges")
        src.append(nodes(row[0].strip(), where))
        dst.append(nodes(row[1].strip(), where))
        if len(header) == 3:
            weights.append(_number(row[2].strip(), where, "weight"))
    return _finish(name, nodes, src, dst, weights if len(header) == 3 else None, limits)


_MASK_VALUES = {"1": True, "true": True, "0": False, "false": False, "": False}


def _apply_node_csv(graph: GraphFile, name: str, text: str) -> GraphFile:
    """Node CSV: header ``id,label`` then any columns; ``split`` (train / val /
    test / empty) or ``train_mask``, ``val_mask``, ``test_mask`` (0/1/true/false)
    give the split, every other column is a feature."""
    rows = list(csv.reader(io.StringIO(text)))
    if not rows or [h.strip().lower() for h in rows[0][:2]] != ["id", "label"]:
        raise GraphFileError("node CSV line 1: header must start with 'id,label'")
    header = [h.strip().lower() for h in rows[0]]
    special = {h: k for k, h in enumerate(header) if h in ("split",) + _MASK_FIELDS}
    for h in special:
        if header.count(h) > 1:
            raise GraphFileError(f"node CSV line 1: column {h!r} appears more than once")
    if "split" in special and len(special) > 1:
        raise GraphFileError("node CSV line 1: use a 'split' column or train_mask/val_mask/"
                             "test_mask columns, not both")
    columns = [k for k in range(2, len(header)) if k not in special.values()]
    width = len(columns)
    index = {n: i for i, n in enumerate(graph.names)}
    names = list(graph.names)
    labels, feats, parts = {}, {}, {}
    for number, row in enumerate(rows[1:], 2):
        if not row:
            continue
        where = f"node CSV line {number}"
        if len(row) != len(header):
            raise GraphFileError(f"{where}: {len(row)} columns, expected {len(header)} "
                                 "(ragged feature row)")
        key = row[0].strip()
        if key not in index:
            index[key] = len(names)
            names.append(key)
        label = row[1].strip()
        if label:
            value = _number(label, where, "label")
            if value != int(value):
                raise GraphFileError(f"{where}: label {label!r} is not an integer")
            labels[index[key]] = int(value)
        feats[index[key]] = [_number(row[k].strip(), where, "feature") for k in columns]
        if "split" in special:
            parts[index[key]] = _split_value(row[special["split"]], where)
        elif special:
            parts[index[key]] = _mask_columns(row, special, where)
    n = len(names)
    y = np.full(n, -1, np.int32)
    for i, v in labels.items():
        y[i] = v
    x = None
    if width:
        missing = [names[i] for i in range(n) if i not in feats]
        if missing:
            raise GraphFileError(f"node CSV: no row for node {missing[0]!r}")
        x = np.asarray([feats[i] for i in range(n)], np.float32)
    if special:  # the node CSV's split replaces the edge file's
        split = _split_from_parts([parts.get(i, -1) for i in range(n)])
    elif graph.split is not None:  # keep the edge file's split; new nodes are in none
        pad = n - graph.num_nodes
        split = tuple(np.concatenate([m, np.zeros(pad, bool)]) for m in graph.split)
    else:
        split = None
    return dataclasses.replace(graph, names=tuple(names), labels=y, features=x, split=split)


def _mask_columns(row, special: dict, where: str) -> int:
    """The split index given by a row's ``*_mask`` columns (-1: none)."""
    chosen = []
    for k, field in enumerate(_MASK_FIELDS):
        if field not in special:
            continue
        value = row[special[field]]
        flag = _MASK_VALUES.get(value.strip().lower())
        if flag is None:
            raise GraphFileError(f"{where}: field {field!r}: {value!r} is not 0, 1, true "
                                 "or false")
        if flag:
            chosen.append(k)
    if len(chosen) > 1:
        raise GraphFileError(f"{where}: fields {_MASK_FIELDS[chosen[0]]!r} and "
                             f"{_MASK_FIELDS[chosen[1]]!r} are both set; a node belongs to "
                             "at most one split")
    return chosen[0] if chosen else -1


def _read_json(name: str, text: str, limits: Limits) -> GraphFile:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise GraphFileError(f"{name} line {err.lineno}: invalid JSON: {err.msg}") from None
    if not isinstance(data, dict) or not isinstance(data.get("nodes"), list):
        raise GraphFileError(f"{name}: expected node-link JSON with a 'nodes' list")
    links = data.get("links", data.get("edges", []))
    if not isinstance(links, list):
        raise GraphFileError(f"{name}: 'links' must be a list")
    if len(links) > limits.max_edges:
        raise GraphFileError(f"{name}: more than {limits.max_edges} edges")
    nodes = _Nodes(name, limits)
    labels, feats, parts = [], [], []
    for k, node in enumerate(data["nodes"]):
        where = f"{name} nodes[{k}]"
        if not isinstance(node, dict) or "id" not in node:
            raise GraphFileError(f"{where}: each node needs an 'id'")
        key = str(node["id"])
        if key in nodes.index:
            raise GraphFileError(f"{where}: duplicate node id {key!r}")
        nodes(key, where)
        label = node.get("label", -1)
        if isinstance(label, bool) or not isinstance(label, int):
            raise GraphFileError(f"{where}: label {label!r} is not an integer")
        labels.append(label)
        parts.append(_split_value(node.get("split"), where))
        x = node.get("x")
        if x is not None:
            if not isinstance(x, list):
                raise GraphFileError(f"{where}: 'x' must be a list of numbers")
            feats.append([_number(str(v), where, "feature") for v in x])
    if feats and (len(feats) != len(labels) or len({len(f) for f in feats}) > 1):
        raise GraphFileError(f"{name}: features 'x' missing on some nodes or ragged")
    src, dst, weights = [], [], []
    weighted = bool(links) and all(isinstance(e, dict) and "weight" in e for e in links)
    for k, link in enumerate(links):
        where = f"{name} links[{k}]"
        if not isinstance(link, dict) or "source" not in link or "target" not in link:
            raise GraphFileError(f"{where}: each link needs 'source' and 'target'")
        for end in ("source", "target"):
            if str(link[end]) not in nodes.index:
                raise GraphFileError(f"{where}: {end} {link[end]!r} is not a node id")
        src.append(nodes.index[str(link["source"])])
        dst.append(nodes.index[str(link["target"])])
        if weighted:
            weights.append(_number(str(link["weight"]), where, "weight"))
    return _finish(name, nodes, src, dst, weights if weighted else None, limits,
                   labels=np.asarray(labels, np.int32),
                   features=np.asarray(feats, np.float32) if feats else None,
                   directed=bool(data.get("directed", False)), split=_split_from_parts(parts))


def _read_graphml(name: str, text: str, limits: Limits) -> GraphFile:
    import networkx as nx

    head = text[:4096].upper()
    if "<!DOCTYPE" in head or "<!ENTITY" in text.upper():
        raise GraphFileError(f"{name}: DOCTYPE/ENTITY declarations are not allowed in GraphML")
    try:
        G = nx.parse_graphml(text)
    except Exception as err:  # malformed XML or GraphML of any kind
        raise GraphFileError(f"{name}: invalid GraphML: {str(err)[:120]}") from None
    return _from_networkx(name, G, limits)


def _read_gml(name: str, text: str, limits: Limits) -> GraphFile:
    import networkx as nx

    try:
        G = nx.parse_gml(text, label="label")
    except Exception as err:  # networkx raises NetworkXError and others on bad GML
        raise GraphFileError(f"{name}: invalid GML: {str(err)[:120]}") from None
    return _from_networkx(name, G, limits)


def _from_networkx(name: str, G, limits: Limits) -> GraphFile:
    if G.number_of_nodes() > limits.max_nodes:
        raise GraphFileError(f"{name}: more than {limits.max_nodes} nodes")
    if G.number_of_edges() > limits.max_edges:
        raise GraphFileError(f"{name}: more than {limits.max_edges} edges")
    nodes = _Nodes(name, limits)
    labels, parts = [], []
    for n, attrs in G.nodes(data=True):
        nodes(str(n), f"{name} node {n!r}")
        label = attrs.get("y", -1)
        if isinstance(label, bool) or not isinstance(label, (int, np.integer)):
            raise GraphFileError(f"{name} node {n!r}: label {label!r} is not an integer")
        labels.append(int(label))
        parts.append(_split_value(attrs.get("split"), f"{name} node {n!r}"))
    edges = list(G.edges(data=True))
    weighted = bool(edges) and all("weight" in d for _, _, d in edges)
    src = [nodes.index[str(u)] for u, _, _ in edges]
    dst = [nodes.index[str(v)] for _, v, _ in edges]
    weights = ([_number(str(d["weight"]), f"{name} edge {u!r}-{v!r}", "weight")
                for u, v, d in edges] if weighted else None)
    return _finish(name, nodes, src, dst, weights, limits,
                   labels=np.asarray(labels, np.int32), directed=G.is_directed(),
                   split=_split_from_parts(parts))


def _read_npz(name: str, data: bytes, limits: Limits) -> GraphFile:
    try:
        archive = np.load(io.BytesIO(data), allow_pickle=False)
    except (ValueError, OSError, zipfile.BadZipFile, EOFError):
        raise GraphFileError(f"{name}: not a valid .npz archive") from None
    try:
        arrays = {key: archive[key] for key in archive.files}
    except ValueError:
        raise GraphFileError(f"{name}: holds pickled objects, which are never loaded") from None
    if "edge_index" not in arrays:
        raise GraphFileError(f"{name}: missing the 'edge_index' array")
    ei = arrays["edge_index"]
    if ei.ndim != 2 or ei.shape[0] != 2 or ei.dtype.kind not in "iu":
        raise GraphFileError(f"{name} field edge_index: must be integers of shape [2, E], got "
                             f"{ei.dtype} {list(ei.shape)}")
    if ei.shape[1] > limits.max_edges:
        raise GraphFileError(f"{name} field edge_index: more than {limits.max_edges} edges")
    x, y = arrays.get("x"), arrays.get("y")
    masks = [arrays[key] for key in _MASK_FIELDS if key in arrays]
    sizes = [a.shape[0] for a in (x, y, *masks) if a is not None and a.ndim >= 1]
    n = sizes[0] if sizes else (int(ei.max()) + 1 if ei.size else 0)
    if n == 0:
        raise GraphFileError(f"{name}: the graph has no nodes")
    if n > limits.max_nodes:
        raise GraphFileError(f"{name}: {n} nodes is over the limit of {limits.max_nodes}")
    if ei.size and (ei.min() < 0 or ei.max() >= n):
        bad = int(ei.min()) if ei.min() < 0 else int(ei.max())
        raise GraphFileError(f"{name} field edge_index: id {bad} is out of range for {n} nodes")
    if x is not None:
        if x.ndim != 2 or x.shape[0] != n:
            raise GraphFileError(f"{name} field x: must be [{n}, F], got {list(x.shape)}")
        if x.dtype.kind not in "biuf":
            raise GraphFileError(f"{name} field x: must be numeric, got {x.dtype}")
        if not np.all(np.isfinite(x)):
            raise GraphFileError(f"{name} field x: contains NaN or Inf")
    if y is not None and (y.shape != (n,) or y.dtype.kind not in "iu"):
        raise GraphFileError(f"{name} field y: must be integers of shape [{n}], got "
                             f"{y.dtype} {list(y.shape)}")
    split = _npz_split(name, arrays, n)
    undirected = bool(arrays["undirected"]) if "undirected" in arrays else False
    return GraphFile(names=tuple(str(i) for i in range(n)), edge_index=ei.astype(np.int64),
                     labels=None if y is None else y.astype(np.int32),
                     features=None if x is None else x.astype(np.float32),
                     directed=not undirected, split=split)


def _npz_split(name: str, arrays: dict, n: int):
    """The ``*_mask`` arrays as a split (a missing one: no node); ``None`` if
    the archive has none of them."""
    if not any(key in arrays for key in _MASK_FIELDS):
        return None
    masks = []
    for key in _MASK_FIELDS:
        if key not in arrays:
            masks.append(np.zeros(n, bool))
            continue
        mask, where = arrays[key], f"{name}: field {key!r}"
        if mask.ndim != 1:
            raise GraphFileError(f"{where}: must hold one entry per node (shape [{n}]), got "
                                 f"shape {list(mask.shape)}")
        if mask.shape[0] != n:
            raise GraphFileError(f"{where}: {mask.shape[0]} entries for {n} nodes")
        if mask.dtype.kind in "iu":
            bad = mask[(mask != 0) & (mask != 1)]
            if bad.size:
                raise GraphFileError(f"{where}: holds {bad[0]}; an integer mask holds only "
                                     "0 and 1")
        elif mask.dtype != bool:
            raise GraphFileError(f"{where}: must be bool (or integers 0/1), got {mask.dtype}")
        masks.append(mask.astype(bool))
    for a, b in ((0, 1), (0, 2), (1, 2)):
        both = np.flatnonzero(masks[a] & masks[b])
        if both.size:
            raise GraphFileError(f"{name}: fields {_MASK_FIELDS[a]!r} and {_MASK_FIELDS[b]!r} "
                                 f"both hold node {both[0]} ({both.size} nodes in both); a "
                                 "node belongs to at most one split")
    return tuple(masks)


def _clean(graph: GraphFile, name: str, drop_duplicates: bool,
           drop_self_loops: bool) -> GraphFile:
    """Count (and optionally drop) duplicate edges and self loops."""
    ei = graph.edge_index
    keys = ei.T if graph.directed else np.sort(ei, axis=0).T
    _, first = np.unique(keys, axis=0, return_index=True) if ei.size else (None, np.zeros(0, int))
    duplicate = np.ones(ei.shape[1], bool)
    duplicate[first] = False
    loops = ei[0] == ei[1]
    warnings = list(graph.warnings)
    if duplicate.any():
        warnings.append(f"{name}: {int(duplicate.sum())} duplicate edges "
                        + ("dropped" if drop_duplicates else "kept"))
    if loops.any():
        warnings.append(f"{name}: {int(loops.sum())} self loops "
                        + ("dropped" if drop_self_loops else "kept"))
    keep = ~((duplicate & drop_duplicates) | (loops & drop_self_loops))
    w = None if graph.weights is None else graph.weights[keep]
    return dataclasses.replace(graph, edge_index=ei[:, keep], weights=w,
                               warnings=tuple(warnings))


# ------------------------------------------------------------------ writing
def export_graph(graph: GraphFile, fmt: str) -> bytes:
    """The graph in format ``fmt`` (``edgelist``, ``csv``, ``json``, ``npz``,
    ``graphml``, ``gml``). The split goes wherever the format has a place for
    it: the ``*_mask`` arrays of ``npz``, the ``split`` node attribute of
    ``json``, ``graphml`` and ``gml``. Edge lists and edge CSVs hold only edges
    (:func:`export_node_csv` writes the node CSV that goes with them)."""
    names, (src, dst) = graph.names, graph.edge_index
    w = graph.weights
    if fmt == "edgelist":
        lines = [f"{names[s]} {names[t]}" + ("" if w is None else f" {float(w[k])!r}")
                 for k, (s, t) in enumerate(zip(src, dst))]
        return ("\n".join(lines) + "\n").encode()
    if fmt == "csv":
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(["source", "target"] + ([] if w is None else ["weight"]))
        for k, (s, t) in enumerate(zip(src, dst)):
            writer.writerow([names[s], names[t]] + ([] if w is None else [repr(float(w[k]))]))
        return out.getvalue().encode()
    if fmt == "json":
        nodes = []
        for i, name in enumerate(names):
            node = {"id": name, "label": -1 if graph.labels is None else int(graph.labels[i])}
            if graph.features is not None:
                node["x"] = [float(v) for v in graph.features[i]]
            if graph.split_of(i):
                node["split"] = graph.split_of(i)
            nodes.append(node)
        links = [{"source": names[s], "target": names[t]}
                 | ({} if w is None else {"weight": float(w[k])})
                 for k, (s, t) in enumerate(zip(src, dst))]
        return json.dumps({"directed": graph.directed, "nodes": nodes, "links": links}).encode()
    if fmt == "npz":
        arrays = {"edge_index": graph.edge_index.astype(np.int32),
                  "undirected": np.asarray(not graph.directed)}
        if graph.labels is not None:
            arrays["y"] = graph.labels.astype(np.int32)
        if graph.features is not None:
            arrays["x"] = graph.features.astype(np.float32)
        if graph.split is not None:
            for key, mask in zip(_MASK_FIELDS, graph.split):
                arrays[key] = np.asarray(mask, bool)
        out = io.BytesIO()
        np.savez(out, **arrays)
        return out.getvalue()
    if fmt in ("graphml", "gml"):
        import networkx as nx

        G = nx.DiGraph() if graph.directed else nx.Graph()
        for i, name in enumerate(names):
            split = {"split": graph.split_of(i)} if graph.split_of(i) else {}
            G.add_node(name, y=-1 if graph.labels is None else int(graph.labels[i]), **split)
        for k, (s, t) in enumerate(zip(src, dst)):
            G.add_edge(names[s], names[t], **({} if w is None else {"weight": float(w[k])}))
        lines = nx.generate_graphml(G) if fmt == "graphml" else nx.generate_gml(G)
        return ("\n".join(lines) + "\n").encode()
    raise GraphFileError(f"unknown export format {fmt!r}; choose edgelist, csv, json, npz, "
                         "graphml or gml")


def export_node_csv(graph: GraphFile) -> bytes:
    """The node CSV that goes with an edge list or edge CSV: ``id,label``, a
    ``split`` column when the graph has a split, then one column per feature
    (``x0``, ``x1``, ...). Read it back with ``load_graph_file(..., node_csv=)``."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    width = 0 if graph.features is None else graph.features.shape[1]
    writer.writerow(["id", "label"] + (["split"] if graph.split is not None else [])
                    + [f"x{k}" for k in range(width)])
    for i, name in enumerate(graph.names):
        label = -1 if graph.labels is None else int(graph.labels[i])
        row = [name, "" if label == -1 else str(label)]
        if graph.split is not None:
            row.append(graph.split_of(i))
        if width:
            row += [repr(float(v)) for v in graph.features[i]]
        writer.writerow(row)
    return out.getvalue().encode()

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
attribute ``y`` is the class label (GML uses ``label`` for node names). Text
files are UTF-8, or UTF-8 / UTF-16 / UTF-32 with a byte order mark.

:class:`Limits` is the memory budget of one upload, checked before anything of
that size is allocated: bytes, nodes, edges, the largest class label (a label
sets the width of the model's output layer), feature columns and feature values
(nodes x columns). An ``.npz`` is read member by member from the zip's own
directory and each array's ``.npy`` header: a shape or size over the budget is
refused before its data is decompressed, and arrays outside the schema are
never decompressed at all.

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
import re
import zipfile
import zlib
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

import gnncore

if TYPE_CHECKING:
    from gnncore import Graph

__all__ = ["FORMATS", "MAX_LABEL", "SPLITS", "GraphFile", "GraphFileError", "Limits",
           "export_graph", "export_node_csv", "load_graph_file"]

#: The largest class label anywhere in the app (labels go from -1, unlabelled,
#: to this: 64 classes): files, the canvas and its Label box, links, community
#: labels. The model's output layer has one unit per class.
MAX_LABEL = 63

FORMATS = {".edgelist": "edgelist", ".txt": "edgelist", ".csv": "csv", ".json": "json",
           ".npz": "npz", ".graphml": "graphml", ".gml": "gml"}


#: the split names, in the order of :attr:`GraphFile.split`
SPLITS = ("train", "val", "test")
_MASK_FIELDS = ("train_mask", "val_mask", "test_mask")


class GraphFileError(ValueError):
    """A graph file that cannot be used; the message says where and why."""


@dataclasses.dataclass(frozen=True)
class Limits:
    """What one file may hold. Each is checked before the thing it bounds is
    built: a 167-byte file with the label 1,000,000 would otherwise give the
    model a million-wide output layer, and a 24 KB ``.npz`` of zeros can
    declare gigabytes of features."""

    max_bytes: int = 20 * 1024 * 1024
    max_nodes: int = 50_000
    max_edges: int = 500_000
    #: the largest class label (labels go from -1, unlabelled, to this)
    max_label: int = MAX_LABEL
    #: feature columns (Cora has 1433, CiteSeer 3703)
    max_features: int = 10_000
    #: nodes x feature columns (CiteSeer has 12.3 million); 200 MB as float32
    max_feature_values: int = 50_000_000
    #: the uncompressed size of one ``.npz`` array (a member's declared size
    #: and its ``.npy`` header's shape x itemsize)
    max_array_bytes: int = 256 * 1024 * 1024
    #: entries in an ``.npz``'s zip directory (the schema has 8 arrays; zipfile
    #: builds an object for every entry before anything else can be checked)
    max_npz_members: int = 64


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
        from explorer.sources import FEATURES, build_features, community_labels, split_per_class

        ei, w = self.edge_index, self.weights
        if not self.directed:
            loops = ei[0] == ei[1]
            ei = np.concatenate([ei, ei[::-1, ~loops]], axis=1)
            w = None if w is None else np.concatenate([w, w[~loops]])
        if features == "file":
            if self.features is None and self.num_nodes ** 2 > Limits().max_feature_values:
                raise GraphFileError(
                    f"{self.num_nodes:,} nodes and no features in the file: one-hot ids would "
                    f"be {self.num_nodes ** 2:,} values (at most "
                    f"{Limits().max_feature_values:,}); choose features from {FEATURES}")
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
            # as with a file's labels, at most max_label + 1 classes
            y = community_labels(self.to_networkx(), Limits().max_label + 1)
        else:
            raise GraphFileError("labels: choose 'file' or 'community'")
        train, val, test = (self.split if self.split is not None
                            else split_per_class(y, train_per_class, seed))
        return gnncore.Graph.from_arrays(ei, x, num_nodes=self.num_nodes, edge_weight=w, y=y,
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
    if node_csv is not None and len(node_csv) > limits.max_bytes:
        raise GraphFileError(f"node CSV: {len(node_csv)} bytes is over the limit of "
                             f"{limits.max_bytes}")
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
                result = _apply_node_csv(result, name, _text("node CSV", node_csv), limits)
    except GraphFileError:
        raise
    except RecursionError:  # JSON or GML nested thousands of levels deep
        raise GraphFileError(f"{name}: nested too deeply (brackets inside brackets more "
                             "levels deep than Python can follow)") from None
    except MemoryError:
        raise GraphFileError(f"{name}: too large to read in the memory available") from None
    except Exception as err:  # a bug in a reader must still not leak a traceback
        raise GraphFileError(f"{name}: could not be read ({type(err).__name__})") from None
    return _clean(result, name, drop_duplicates, drop_self_loops)


#: byte order marks, their codecs and names; UTF-32's first, since UTF-32 LE's
#: mark begins with UTF-16 LE's
_BOMS = ((b"\xff\xfe\x00\x00", "utf-32-le", "UTF-32"),
         (b"\x00\x00\xfe\xff", "utf-32-be", "UTF-32"),
         (b"\xef\xbb\xbf", "utf-8", "UTF-8"), (b"\xff\xfe", "utf-16-le", "UTF-16"),
         (b"\xfe\xff", "utf-16-be", "UTF-16"))


def _text(name: str, data: bytes) -> str:
    """``data`` as text: UTF-8, or UTF-8, UTF-16 or UTF-32 after a byte order
    mark (Windows tools save "Unicode" text as UTF-16 with a mark). The mark is
    dropped, so it never becomes part of the first node's name or the CSV
    header. A UTF-16/32 mark counts only if the text then holds an ASCII
    character: two bytes such as ``ff fe`` also start many binary files, while
    every text graph format separates its fields with ASCII characters."""
    failed = None  # (encoding, byte) of a marked text that did not decode
    for bom, codec, label in _BOMS:
        if not data.startswith(bom):
            continue
        try:
            text = data[len(bom):].decode(codec)
        except UnicodeDecodeError as err:
            failed = failed or (label, err.start + len(bom))
            continue
        if label != "UTF-8" and not any(c < "\x80" for c in text):
            continue
        if "\x00" in text:
            raise GraphFileError(f"{name}: binary data, not a text graph file")
        if not text.strip():
            raise GraphFileError(f"{name}: the file is empty")
        return text
    if failed and (failed[0] == "UTF-8" or b"\x00" in data):  # UTF-16/32 text holds zeros
        raise GraphFileError(f"{name}: not {failed[0]} text (byte {failed[1]})")
    if b"\x00" in data:
        raise GraphFileError(f"{name}: binary data, not a text graph file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise GraphFileError(f"{name}: not UTF-8 text (byte {err.start})") from None


def _label(value: int, where: str, limits: Limits) -> int:
    """A class label, -1 (unlabelled) to ``limits.max_label``: the largest label
    sets the width of the model's output layer."""
    if value > limits.max_label:
        raise GraphFileError(f"{where}: label {value} is above the largest class "
                             f"{limits.max_label} (labels go from -1, unlabelled, to "
                             f"{limits.max_label})")
    if value < -1:
        raise GraphFileError(f"{where}: label {value} is below -1 (-1 means unlabelled)")
    return int(value)


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


def _check_width(width: int, where: str, limits: Limits) -> None:
    if width > limits.max_features:
        raise GraphFileError(f"{where}: {width:,} features is over the limit of "
                             f"{limits.max_features:,}")


def _finish(name, nodes, src, dst, weights, limits, **extra) -> GraphFile:
    if not nodes.index:
        raise GraphFileError(f"{name}: the graph has no nodes")
    ei = np.asarray([src, dst], np.int64).reshape(2, -1)
    w = None if weights is None else np.asarray(weights, np.float32)
    return GraphFile(names=tuple(nodes.index), edge_index=ei, weights=w, **extra)


def _lines(text: str, block: int = 1 << 20):
    """``text.splitlines()``, a block of about ``block`` characters at a time: a
    list of every line of a 20 MB file of short lines takes some 300 MB. Blocks
    end just after a newline, which never splits a line break (``\\r\\n`` ends
    in it), so the lines are exactly ``splitlines()``'s."""
    start = 0
    while start < len(text):
        if start + block >= len(text):
            cut = len(text) - 1
        else:
            cut = text.rfind("\n", start, start + block)
            if cut < 0:
                cut = text.find("\n", start + block)
                cut = len(text) - 1 if cut < 0 else cut
        yield from text[start:cut + 1].splitlines()
        start = cut + 1


def _read_edgelist(name: str, text: str, limits: Limits) -> GraphFile:
    nodes, src, dst, weights = _Nodes(name, limits), [], [], []
    has_weight = None
    for number, raw in enumerate(_lines(text), 1):
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
    except csv.Error as err:
        raise GraphFileError(f"{name} line 1: {err}") from None
    if header[:2] != ["source", "target"] or len(header) > 3 or (
            len(header) == 3 and header[2] != "weight"):
        raise GraphFileError(f"{name} line 1: header must be 'source,target[,weight]', got "
                             f"{','.join(header)[:200]!r}")
    nodes, src, dst, weights = _Nodes(name, limits), [], [], []
    try:
        for row in rows:
            if not row or all(not c.strip() for c in row):
                continue
            where = f"{name} line {rows.line_num}"
            if len(row) != len(header):
                raise GraphFileError(f"{where}: {len(row)} columns, expected {len(header)}")
            if len(src) >= limits.max_edges:
                raise GraphFileError(f"{where}: more than {limits.max_edges} edges")
            src.append(nodes(row[0].strip(), where))
            dst.append(nodes(row[1].strip(), where))
            if len(header) == 3:
                weights.append(_number(row[2].strip(), where, "weight"))
    except csv.Error as err:  # e.g. a field longer than csv.field_size_limit()
        raise GraphFileError(f"{name} line {rows.line_num}: {err}") from None
    return _finish(name, nodes, src, dst, weights if len(header) == 3 else None, limits)


_MASK_VALUES = {"1": True, "true": True, "0": False, "false": False, "": False}


def _apply_node_csv(graph: GraphFile, name: str, text: str,
                    limits: Limits = Limits()) -> GraphFile:
    """Node CSV: header ``id,label`` then any columns; ``split`` (train / val /
    test / empty) or ``train_mask``, ``val_mask``, ``test_mask`` (0/1/true/false)
    give the split, every other column is a feature. Rows are read one at a
    time, and the nodes it adds, its labels and its feature columns count
    against ``limits`` like the edge file's."""
    rows = csv.reader(io.StringIO(text))
    try:
        first = next(rows, [])
    except csv.Error as err:
        raise GraphFileError(f"node CSV line 1: {err}") from None
    if [h.strip().lower() for h in first[:2]] != ["id", "label"]:
        raise GraphFileError("node CSV line 1: header must start with 'id,label'")
    header = [h.strip().lower() for h in first]
    special = {h: k for k, h in enumerate(header) if h in ("split",) + _MASK_FIELDS}
    for h in special:
        if header.count(h) > 1:
            raise GraphFileError(f"node CSV line 1: column {h!r} appears more than once")
    if "split" in special and len(special) > 1:
        raise GraphFileError("node CSV line 1: use a 'split' column or train_mask/val_mask/"
                             "test_mask columns, not both")
    columns = [k for k in range(2, len(header)) if k not in special.values()]
    width = len(columns)
    _check_width(width, "node CSV line 1", limits)
    index = {n: i for i, n in enumerate(graph.names)}
    names = list(graph.names)
    labels, feats, parts = {}, {}, {}
    try:
        for row in rows:
            number = rows.line_num
            if not row:
                continue
            where = f"node CSV line {number}"
            if len(row) != len(header):
                raise GraphFileError(f"{where}: {len(row)} columns, expected {len(header)} "
                                     "(ragged feature row)")
            key = row[0].strip()
            if key not in index:
                if len(names) >= limits.max_nodes:
                    raise GraphFileError(f"{where}: more than {limits.max_nodes} nodes")
                index[key] = len(names)
                names.append(key)
            label = row[1].strip()
            if label:
                value = _number(label, where, "label")
                if value != int(value):
                    raise GraphFileError(f"{where}: label {label!r} is not an integer")
                labels[index[key]] = _label(int(value), f"{where} (node {key!r})", limits)
            if width and (len(feats) + 1) * width > limits.max_feature_values:
                raise GraphFileError(f"{where}: more than {limits.max_feature_values:,} "
                                     "feature values in all")
            feats[index[key]] = [_number(row[k].strip(), where, "feature") for k in columns]
            if "split" in special:
                parts[index[key]] = _split_value(row[special["split"]], where)
            elif special:
                parts[index[key]] = _mask_columns(row, special, where)
    except csv.Error as err:
        raise GraphFileError(f"node CSV line {rows.line_num}: {err}") from None
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
    except ValueError as err:  # e.g. an integer of more than 4300 digits
        raise GraphFileError(f"{name}: invalid JSON: {str(err)[:120]}") from None
    if not isinstance(data, dict) or not isinstance(data.get("nodes"), list):
        raise GraphFileError(f"{name}: expected node-link JSON with a 'nodes' list")
    links = data.get("links", data.get("edges", []))
    if not isinstance(links, list):
        raise GraphFileError(f"{name}: 'links' must be a list")
    if len(links) > limits.max_edges:
        raise GraphFileError(f"{name}: more than {limits.max_edges} edges")
    nodes = _Nodes(name, limits)
    labels, feats, parts, values = [], [], [], 0
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
        labels.append(_label(label, f"{where} (node {key!r})", limits))
        parts.append(_split_value(node.get("split"), where))
        x = node.get("x")
        if x is not None:
            if not isinstance(x, list):
                raise GraphFileError(f"{where}: 'x' must be a list of numbers")
            _check_width(len(x), where, limits)
            values += len(x)
            if values > limits.max_feature_values:
                raise GraphFileError(f"{where}: more than {limits.max_feature_values:,} "
                                     "feature values in all")
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


_XML_DECLARATION = re.compile(r"<!\s*(DOCTYPE|ENTITY)", re.IGNORECASE)


def _read_graphml(name: str, text: str, limits: Limits) -> GraphFile:
    import networkx as nx

    # the whole text: a DOCTYPE may follow any amount of comment
    if _XML_DECLARATION.search(text):
        raise GraphFileError(f"{name}: DOCTYPE/ENTITY declarations are not allowed in GraphML")
    _count_xml_elements(name, text, limits)
    try:
        G = nx.parse_graphml(text)
    except Exception as err:  # malformed XML or GraphML of any kind
        raise GraphFileError(f"{name}: invalid GraphML: {str(err)[:120]}") from None
    return _from_networkx(name, G, limits)


#: GraphML needs about six levels (graphml, graph, node, data; nested graphs and
#: ports a few more); a tree thousands deep only costs time
_MAX_XML_DEPTH = 100


class _TooMany(Exception):
    """Raised inside expat's callback to stop at the first element too many."""


def _count_xml_elements(name: str, text: str, limits: Limits) -> None:
    """Count GraphML's ``node`` and ``edge`` elements (and all elements) with a
    streaming parser that builds nothing, before networkx builds an element
    tree and a graph: those cost some 800 MB for an 18 MB file of a million
    ``<node/>`` elements. Elements in all are capped at twice the nodes and
    edges allowed (a node or edge and its ``data``; a file at the byte limit
    holds fewer)."""
    from xml.parsers import expat

    counts = {"node": 0, "edge": 0, "all": 0, "depth": 0}
    caps = {"node": limits.max_nodes, "edge": limits.max_edges,
            "all": 2 * (limits.max_nodes + limits.max_edges), "depth": _MAX_XML_DEPTH}

    def start(tag, _attrs):
        local = tag.rsplit(":", 1)[-1]
        for kind in (local, "all", "depth") if local in ("node", "edge") else ("all", "depth"):
            counts[kind] += 1
            if counts[kind] > caps[kind]:
                raise _TooMany(kind)

    def end(_tag):
        counts["depth"] -= 1

    parser = expat.ParserCreate()
    parser.StartElementHandler, parser.EndElementHandler = start, end
    try:
        parser.Parse(text, True)
    except _TooMany as err:
        kind = err.args[0]
        if kind == "depth":
            raise GraphFileError(f"{name} line {parser.CurrentLineNumber}: nested too deeply "
                                 f"(more than {_MAX_XML_DEPTH} levels of elements)") from None
        what = {"node": "nodes", "edge": "edges", "all": "XML elements"}[kind]
        raise GraphFileError(f"{name} line {parser.CurrentLineNumber}: more than "
                             f"{caps[kind]} {what}") from None
    except expat.ExpatError as err:
        raise GraphFileError(f"{name} line {err.lineno}: invalid GraphML: "
                             f"{expat.ErrorString(err.code)}") from None


def _read_gml(name: str, text: str, limits: Limits) -> GraphFile:
    import networkx as nx

    for kind, cap in (("node", limits.max_nodes), ("edge", limits.max_edges)):
        # an upper bound (a "node [" inside a string counts too), taken before
        # networkx builds every record and the graph
        if sum(1 for _ in zip(_GML_RECORD[kind].finditer(text), range(cap + 1))) > cap:
            raise GraphFileError(f"{name}: more than {cap} {kind}s")
    try:
        G = nx.parse_gml(text, label="label")
    except RecursionError:
        raise
    except Exception as err:  # networkx raises NetworkXError and others on bad GML
        raise GraphFileError(f"{name}: invalid GML: {str(err)[:120]}") from None
    return _from_networkx(name, G, limits)


_GML_RECORD = {kind: re.compile(rf"\b{kind}\s*\[") for kind in ("node", "edge")}


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
        labels.append(_label(int(label), f"{name} node {n!r}", limits))
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


#: the arrays of the schema; any other member of an archive is never decompressed
_NPZ_FIELDS = ("edge_index", "x", "y", "undirected", *_MASK_FIELDS)
#: room for a ``.npy`` header on top of its data (numpy caps headers at 10,000 bytes)
_NPY_HEADER_ROOM = 64 * 1024


@dataclasses.dataclass(frozen=True)
class _Member:
    """One array of an ``.npz``, as its zip entry and ``.npy`` header declare it."""

    info: zipfile.ZipInfo
    shape: tuple[int, ...]
    dtype: np.dtype

    def load(self, archive: zipfile.ZipFile, where: str) -> np.ndarray:
        try:
            with archive.open(self.info) as f:
                return np.lib.format.read_array(f, allow_pickle=False)
        except Exception as err:  # truncated or damaged data: EOF, bad CRC, zlib errors
            raise GraphFileError(f"{where}: damaged data ({type(err).__name__}: "
                                 f"{str(err)[:100]})") from None


def _read_npz(name: str, data: bytes, limits: Limits) -> GraphFile:
    """An ``.npz`` in three steps, so that nothing large is allocated for a
    file over the budget: every schema member's zip entry and ``.npy`` header
    (shape, dtype), checked against :class:`Limits` and against each other;
    then the arrays, each of a size already known to be allowed; then their
    values. ``np.load`` is not used: it decompresses a member to learn its
    shape, and has no limit on what the header declares."""
    # zipfile makes an object for every entry of the zip directory up front;
    # each entry starts with this signature, so this bounds their number
    entries = data.count(b"PK\x01\x02")
    if entries > limits.max_npz_members:
        raise GraphFileError(f"{name}: {entries} entries in the archive is over the limit of "
                             f"{limits.max_npz_members}")
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        infos = archive.infolist()
    except Exception:  # zipfile raises BadZipFile, ValueError, OSError, ... on damage
        raise GraphFileError(f"{name}: not a valid .npz archive") from None
    members = {}
    for info in infos:  # a name written twice: the last one, as zipfile and np.load read
        if info.filename.endswith(".npy"):
            members[info.filename[:-4]] = info
    arrays = {}
    for key, info in members.items():
        member = _npy_header(name, archive, key, info, limits)
        if member is not None:
            arrays[key] = member
    if "edge_index" not in arrays:
        raise GraphFileError(f"{name}: missing the 'edge_index' array")
    e = arrays["edge_index"]
    if len(e.shape) != 2 or e.shape[0] != 2 or e.dtype.kind not in "iu":
        raise GraphFileError(f"{name} field edge_index: must be integers of shape [2, E], got "
                             f"{e.dtype} {list(e.shape)}")
    ei = None
    sizes = [arrays[key].shape[0] for key in ("x", "y", *_MASK_FIELDS)
             if key in arrays and len(arrays[key].shape) >= 1]
    if sizes:
        n = sizes[0]
    else:  # the edges alone give the node count
        ei = e.load(archive, f"{name} field edge_index")
        n = int(ei.max()) + 1 if ei.size else 0
    if n == 0:
        raise GraphFileError(f"{name}: the graph has no nodes")
    if n > limits.max_nodes:
        raise GraphFileError(f"{name}: {n} nodes is over the limit of {limits.max_nodes}")
    if "x" in arrays:
        x = arrays["x"]
        if len(x.shape) != 2 or x.shape[0] != n:
            raise GraphFileError(f"{name} field x: must be [{n}, F], got {list(x.shape)}")
        if x.dtype.kind not in "biuf":
            raise GraphFileError(f"{name} field x: must be numeric, got {x.dtype}")
    if "y" in arrays and (arrays["y"].shape != (n,) or arrays["y"].dtype.kind not in "iu"):
        raise GraphFileError(f"{name} field y: must be integers of shape [{n}] (class labels, "
                             f"-1 = unlabelled), got {arrays['y'].dtype} "
                             f"{list(arrays['y'].shape)}")
    for key in _MASK_FIELDS:
        if key in arrays:
            _check_mask_header(f"{name}: field {key!r}", arrays[key], n)
    if "undirected" in arrays and (math.prod(arrays["undirected"].shape) != 1
                                   or arrays["undirected"].dtype.kind not in "biu"):
        u = arrays["undirected"]
        raise GraphFileError(f"{name} field undirected: must be one bool, got {u.dtype} "
                             f"{list(u.shape)}")
    # every size is now known to be within the limits: read the data
    loaded = {key: member.load(archive, f"{name} field {key}")
              for key, member in arrays.items() if key != "edge_index"}
    ei = e.load(archive, f"{name} field edge_index") if ei is None else ei
    if ei.size and (ei.min() < 0 or ei.max() >= n):
        bad = int(ei.min()) if ei.min() < 0 else int(ei.max())
        raise GraphFileError(f"{name} field edge_index: id {bad} is out of range for {n} nodes")
    x, y = loaded.get("x"), loaded.get("y")
    if x is not None and x.dtype.kind == "f" and not np.all(np.isfinite(x)):
        raise GraphFileError(f"{name} field x: contains NaN or Inf")
    if y is not None:
        bad = np.flatnonzero((y < -1) | (y > limits.max_label))
        if bad.size:
            _label(int(y[bad[0]]), f"{name} field y: node {bad[0]}", limits)
    split = _npz_split(name, loaded, n)
    undirected = bool(loaded["undirected"].reshape(())) if "undirected" in loaded else False
    return GraphFile(names=tuple(str(i) for i in range(n)), edge_index=ei.astype(np.int64),
                     labels=None if y is None else y.astype(np.int32),
                     features=None if x is None else x.astype(np.float32),
                     directed=not undirected, split=split)


def _npy_header(name: str, archive: zipfile.ZipFile, key: str, info: zipfile.ZipInfo,
                limits: Limits) -> _Member | None:
    """A member's declared shape and dtype, from its zip entry and the first
    bytes of its ``.npy`` stream (the data after the header is not touched),
    checked against ``limits``. ``None`` for a member outside the schema (only
    its header is read, to refuse pickled objects; an unreadable one is
    ignored)."""
    known, where = key in _NPZ_FIELDS, f"{name} field {key}"
    if info.flag_bits & 0x1 or info.compress_type not in (zipfile.ZIP_STORED,
                                                          zipfile.ZIP_DEFLATED):
        if not known:
            return None
        raise GraphFileError(f"{where}: encrypted or compressed with zip method "
                             f"{info.compress_type}; only stored and deflated arrays are read "
                             "(np.savez, np.savez_compressed)")
    if known and info.file_size > limits.max_array_bytes + _NPY_HEADER_ROOM:
        raise GraphFileError(f"{where}: {info.file_size:,} bytes uncompressed is over the "
                             f"limit of {limits.max_array_bytes:,}")
    try:
        with archive.open(info) as f:
            version = np.lib.format.read_magic(f)
            if version == (1, 0):
                shape, _, dtype = np.lib.format.read_array_header_1_0(f)
            elif version == (2, 0):
                shape, _, dtype = np.lib.format.read_array_header_2_0(f)
            else:
                raise ValueError(f".npy format version {version[0]}.{version[1]} is not read")
            data_size = info.file_size - f.tell()  # what the member holds after its header
    except Exception as err:  # no .npy header (bad magic, ...) or a damaged stream
        if not known:
            return None
        if isinstance(err, (zipfile.BadZipFile, zlib.error, EOFError)):  # e.g. a bad CRC
            raise GraphFileError(f"{where}: damaged data ({type(err).__name__}: "
                                 f"{str(err)[:100]})") from None
        raise GraphFileError(f"{where}: not a readable .npy array ({str(err)[:100]})") from None
    if dtype.hasobject:
        raise GraphFileError(f"{where}: holds pickled objects (dtype {dtype}), which are never "
                             "loaded")
    if not known:
        return None
    if any(d < 0 for d in shape):
        raise GraphFileError(f"{where}: the header declares shape {list(shape)}")
    if key == "edge_index" and len(shape) == 2 and shape[1] > limits.max_edges:
        raise GraphFileError(f"{where}: more than {limits.max_edges} edges")
    if key == "x" and len(shape) == 2:
        _check_width(shape[1], where, limits)
        if shape[0] * shape[1] > limits.max_feature_values:
            raise GraphFileError(f"{where}: {shape[0]:,} x {shape[1]:,} feature values is over "
                                 f"the limit of {limits.max_feature_values:,}")
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes > limits.max_array_bytes:
        raise GraphFileError(f"{where}: {dtype} {list(shape)} is {nbytes:,} bytes, over the "
                             f"limit of {limits.max_array_bytes:,}")
    if nbytes > data_size:
        raise GraphFileError(f"{where}: the header declares {dtype} {list(shape)} "
                             f"({nbytes:,} bytes), but the member holds {max(data_size, 0):,}")
    return _Member(info, tuple(shape), dtype)


def _check_mask_header(where: str, mask: _Member, n: int) -> None:
    if len(mask.shape) != 1:
        raise GraphFileError(f"{where}: must hold one entry per node (shape [{n}]), got "
                             f"shape {list(mask.shape)}")
    if mask.shape[0] != n:
        raise GraphFileError(f"{where}: {mask.shape[0]} entries for {n} nodes")
    if mask.dtype != bool and mask.dtype.kind not in "iu":
        raise GraphFileError(f"{where}: must be bool (or integers 0/1), got {mask.dtype}")


def _npz_split(name: str, arrays: dict, n: int):
    """The ``*_mask`` arrays (shapes and dtypes already checked by
    :func:`_check_mask_header`) as a split (a missing one: no node); ``None``
    if the archive has none of them."""
    if not any(key in arrays for key in _MASK_FIELDS):
        return None
    masks = []
    for key in _MASK_FIELDS:
        if key not in arrays:
            masks.append(np.zeros(n, bool))
            continue
        mask, where = arrays[key], f"{name}: field {key!r}"
        if mask.dtype.kind in "iu":
            bad = mask[(mask != 0) & (mask != 1)]
            if bad.size:
                raise GraphFileError(f"{where}: holds {bad[0]}; an integer mask holds only "
                                     "0 and 1")
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

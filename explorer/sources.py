"""Graph sources: built-in presets and seeded generators, node features and
train/val/test splits, all producing a :class:`gnncore.Graph`. No streamlit.

Every preset is deterministic given a seed. ``PRESETS`` maps a name to a
:class:`Preset` with a one-line description; :func:`load_graph` turns one into
a training-ready ``Graph``. Two presets are real citation graphs shipped in
``assets/`` (``cora``, ``citeseer``): they bring their own node features
(``features="file"``) and the public train/val/test split, which is always used
for them; :func:`preset_file` gives the whole file.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import networkx as nx
import numpy as np

import gnncore

if TYPE_CHECKING:
    from gnncore import Graph

__all__ = ["ASSETS", "FEATURES", "GRAPH_FEATURES", "GRAPH_TASKS", "PRESETS", "Preset",
           "build_features", "graph_classification_dataset", "load_graph_dataset",
           "split_graphs", "load_graph", "preset_file", "preset_graph", "split_per_class"]

def _assets() -> Path:
    """``assets/`` at the top of a checkout, or the copy an installed package
    carries (``gnn_jit_explorer_assets``, see pyproject.toml)."""
    checkout = Path(__file__).resolve().parent.parent / "assets"
    if (checkout / "cytoscape" / "cytoscape.min.js").is_file():
        return checkout
    import importlib.util

    spec = importlib.util.find_spec("gnn_jit_explorer_assets")
    if spec is None or not spec.submodule_search_locations:
        return checkout  # neither: the presets that need a file say it is missing
    return Path(list(spec.submodule_search_locations)[0])


#: the files the app ships (``assets/`` at the top of the repository)
ASSETS = _assets()


@dataclasses.dataclass(frozen=True)
class Preset:
    """A graph source: ``build(seed, difficulty)`` → ``(networkx graph, labels)``.

    Arguments:
        description: one line for the picker.
        build: makes the graph; ``difficulty`` in [0, 1] only matters for
            synthetic tasks (0 = easy).
        synthetic: whether ``difficulty`` changes the graph.
        file: for a real dataset, its file in ``assets/`` (read by
            :func:`preset_file`); the file's features and split are used.
        default_features: the node features used when none are chosen
            (``file`` for the datasets, ``one_hot`` otherwise).
    """

    description: str
    build: Callable[[int, float], tuple[nx.Graph, np.ndarray]]
    synthetic: bool = False
    file: str | None = None
    default_features: str = "one_hot"


@dataclasses.dataclass(frozen=True)
class GraphSource:
    """Where the graph on show came from: ``kind`` is ``preset``, ``dataset``
    (graph classification), ``file`` (an upload), ``shared link`` or
    ``drawing``; ``name`` the preset, dataset or file name (text a person
    wrote: show it as text)."""

    kind: str
    name: str = ""

    @property
    def shipped(self) -> bool:
        """A preset or dataset the app ships: a link can name it instead of
        carrying it."""
        return self.kind in ("preset", "dataset")

    def __str__(self) -> str:
        return f"{self.kind}: {self.name}" if self.name else self.kind


#: above this many edges, communities come from label propagation: networkx's
#: Louvain took 125 s of a 100,000-edge upload's 134 s (2-core machine)
LOUVAIN_MAX_EDGES = 50_000
#: above this many nodes, Louvain instead of greedy modularity (quadratic-ish)
GREEDY_MAX_NODES = 2000


def community_labels(G: nx.Graph, max_classes: int | None = None) -> np.ndarray:
    """A label per node of ``G`` (in ``G``'s node order): its community,
    largest first, found from the structure alone (edge weights ignored) and
    deterministically. With ``max_classes``, nodes outside the largest
    ``max_classes`` communities stay unlabelled (-1), so a graph of many
    pieces cannot widen a model's output layer."""
    G = G.to_undirected() if G.is_directed() else G
    index = {n: i for i, n in enumerate(G)}
    if G.number_of_edges() > LOUVAIN_MAX_EDGES:
        found = nx.community.asyn_lpa_communities(G, seed=0)  # linear in the edges
    elif G.number_of_nodes() > GREEDY_MAX_NODES:
        found = nx.community.louvain_communities(G, weight=None, seed=0)
    else:
        found = nx.community.greedy_modularity_communities(G, weight=None)
    found = sorted(found, key=lambda m: (-len(m), min(index[n] for n in m)))
    labels = np.full(G.number_of_nodes(), -1, np.int32)
    for c, members in enumerate(found[:max_classes]):
        labels[[index[n] for n in members]] = c
    return labels


def _karate(seed, difficulty):
    G = nx.karate_club_graph()
    clubs = sorted({G.nodes[n]["club"] for n in G})
    return G, np.asarray([clubs.index(G.nodes[n]["club"]) for n in G], np.int32)


def _florentine(seed, difficulty):
    G = nx.florentine_families_graph()
    return G, community_labels(G)


def _les_miserables(seed, difficulty):
    G = nx.les_miserables_graph()
    return G, community_labels(G)


def _davis(seed, difficulty):
    G = nx.davis_southern_women_graph()
    return G, np.asarray([G.nodes[n]["bipartite"] for n in G], np.int32)


def _noise_edges(G: nx.Graph, count: int, rng: np.random.Generator) -> None:
    """Add ``count`` random edges: the difficulty knob of the synthetic tasks."""
    nodes = list(G)
    for _ in range(count):
        u, v = rng.choice(len(nodes), size=2, replace=False)
        G.add_edge(nodes[u], nodes[v])


def _sbm(seed, difficulty):
    sizes = [20, 20, 20]
    p_in = 0.3
    p_out = 0.02 + 0.25 * difficulty  # at difficulty 1 blocks are barely distinguishable
    probs = [[p_in if i == j else p_out for j in range(3)] for i in range(3)]
    G = nx.stochastic_block_model(sizes, probs, seed=seed)
    return nx.Graph(G), np.repeat(np.arange(3, dtype=np.int32), sizes)


def _ring_of_cliques(seed, difficulty):
    G = nx.ring_of_cliques(4, 6)
    _noise_edges(G, int(round(30 * difficulty)), np.random.default_rng(seed))
    return G, (np.arange(24) // 6).astype(np.int32)


def _grid_regions(seed, difficulty):
    G = nx.convert_node_labels_to_integers(nx.grid_2d_graph(8, 8), ordering="sorted")
    rows, cols = np.divmod(np.arange(64), 8)
    labels = ((rows >= 4) * 2 + (cols >= 4)).astype(np.int32)
    _noise_edges(G, int(round(40 * difficulty)), np.random.default_rng(seed))
    return G, labels


def _random_geometric(seed, difficulty):
    G = nx.random_geometric_graph(80, 0.18 + 0.1 * difficulty, seed=seed)
    pos = np.asarray([G.nodes[n]["pos"] for n in G])
    labels = ((pos[:, 1] >= 0.5) * 2 + (pos[:, 0] >= 0.5)).astype(np.int32)
    return G, labels


def _from_file(name: str):
    def build(seed, difficulty):  # the file is the graph: seed and difficulty change nothing
        gf = preset_file(name)
        G = gf.to_networkx()
        return G, (gf.labels.copy() if gf.labels is not None
                   else np.full(gf.num_nodes, -1, np.int32))

    return build


def _named(make):
    def build(seed, difficulty):
        G = make()
        colours = nx.greedy_color(G, strategy="largest_first")
        return G, np.asarray([colours[n] for n in G], np.int32)

    return build


PRESETS: dict[str, Preset] = {
    "karate": Preset("Zachary's karate club (34 members), labelled by the club each joined",
                     _karate),
    "florentine": Preset("Marriage ties of 15 Florentine families, labelled by community",
                         _florentine),
    "les_miserables": Preset("Co-appearances of 77 Les Misérables characters, labelled by "
                             "community", _les_miserables),
    "davis_southern_women": Preset("Davis' southern women and the events they attended "
                                   "(labels: woman or event)", _davis),
    "sbm": Preset("Stochastic block model: 3 blocks of 20; difficulty raises the "
                  "between-block edge probability", _sbm, synthetic=True),
    "ring_of_cliques": Preset("4 cliques of 6 in a ring, labelled by clique; difficulty adds "
                              "random edges", _ring_of_cliques, synthetic=True),
    "grid_regions": Preset("8×8 grid labelled by quadrant; difficulty adds random shortcuts",
                           _grid_regions, synthetic=True),
    "random_geometric": Preset("80 random points joined when close, labelled by quadrant; "
                               "difficulty widens the radius", _random_geometric,
                               synthetic=True),
    "petersen": Preset("The Petersen graph (labels: a greedy colouring)",
                       _named(nx.petersen_graph)),
    "house": Preset("The house graph (labels: a greedy colouring)", _named(nx.house_graph)),
    "cycle": Preset("A cycle of 8 nodes (labels: a greedy colouring)",
                    _named(lambda: nx.cycle_graph(8))),
    "path": Preset("A path of 8 nodes (labels: a greedy colouring)",
                   _named(lambda: nx.path_graph(8))),
    "star": Preset("A star with 7 leaves (labels: centre or leaf)",
                   _named(lambda: nx.star_graph(7))),
    "complete": Preset("The complete graph on 6 nodes (labels: a greedy colouring)",
                       _named(lambda: nx.complete_graph(6))),
    "cora": Preset("Cora: 2708 papers, 5278 citations, 1433 word features, 7 topics; "
                   "public split 140/500/1000", _from_file("cora"), file="cora.npz",
                   default_features="file"),
    "citeseer": Preset("CiteSeer: 3327 papers, 4552 citations, 3703 word features, 6 topics; "
                       "public split 120/500/1000", _from_file("citeseer"),
                       file="citeseer.npz", default_features="file"),
}

#: node feature kinds; ``file`` is the graph's own features (only the presets
#: with a ``file`` have them: nothing to build)
#: kinds that cost memory or time quadratic in the node count (an identity matrix,
#: a dense eigendecomposition): refused above DENSE_FEATURE_NODES
DENSE_FEATURES = ("one_hot", "laplacian")
DENSE_FEATURE_NODES = 5000
SCALABLE_FEATURES = ("degree_one_hot", "degree", "constant", "gaussian")

FEATURES = ("one_hot", "degree", "degree_one_hot", "constant", "gaussian", "laplacian", "file")


def _with_features() -> list[str]:
    return [name for name, p in PRESETS.items() if p.file is not None]


@functools.cache
def preset_file(name: str):
    """The :class:`explorer.graphio.GraphFile` behind a file-backed preset
    (names, labels, features, split; its arrays are read-only, the result is
    cached), or ``None`` for a preset built in code. Raises ``ValueError`` for
    an unknown name or a missing file (naming its path)."""
    from explorer.graphio import load_graph_file

    if name not in PRESETS:
        raise ValueError(f"unknown graph {name!r}; choose one of {sorted(PRESETS)}")
    if PRESETS[name].file is None:
        return None
    path = ASSETS / PRESETS[name].file
    if not path.is_file():
        raise ValueError(f"the {name!r} preset needs its data file {path}, which is missing")
    gf = load_graph_file(path)
    for array in (gf.edge_index, gf.labels, gf.features, *(gf.split or ())):
        if array is not None:
            array.setflags(write=False)  # shared by every caller: nobody may edit it
    return gf


def preset_graph(name: str, *, seed: int = 0, difficulty: float = 0.0):
    """``(networkx graph, labels)`` of a preset; raises ``ValueError`` for an
    unknown name or a difficulty outside [0, 1]."""
    if name not in PRESETS:
        raise ValueError(f"unknown graph {name!r}; choose one of {sorted(PRESETS)}")
    if not 0.0 <= difficulty <= 1.0:
        raise ValueError(f"difficulty must be in [0, 1]; got {difficulty}")
    return PRESETS[name].build(seed, difficulty)


def build_features(G: nx.Graph, kind: str, *, seed: int = 0, dim: int = 8) -> np.ndarray:
    """Node features of ``G`` (in ``list(G)`` order).

    ``one_hot`` node id; ``degree`` (scalar); ``degree_one_hot`` (degrees above
    ``dim - 1`` share the last slot); ``constant``; ``gaussian`` (seeded,
    ``dim`` wide); ``laplacian``: the ``dim`` eigenvectors of the normalised
    Laplacian with the smallest non-zero eigenvalues (zero-padded for small
    graphs; each vector's sign fixed so its largest entry is positive).
    ``file`` (a graph's own features) cannot be built: it raises ``ValueError``.
    """
    n_nodes = G.number_of_nodes()
    if kind in DENSE_FEATURES and n_nodes > DENSE_FEATURE_NODES:
        raise ValueError(f"features {kind!r} on {n_nodes:,} nodes would be a dense "
                         f"{n_nodes:,}-wide matrix; above {DENSE_FEATURE_NODES:,} nodes choose "
                         f"one of {SCALABLE_FEATURES} (or the graph's own, 'file')")
    if kind == "file":
        raise ValueError("features 'file' are the graph's own node features; there is nothing "
                         "to build: use load_graph(name, features='file') for the presets "
                         f"that have them ({', '.join(_with_features())}), or a file's "
                         "GraphFile.to_graph()")
    n = G.number_of_nodes()
    degrees = np.asarray([d for _, d in G.degree()], np.int64)
    if kind == "one_hot":
        return np.eye(n, dtype=np.float32)
    if kind == "degree":
        return degrees[:, None].astype(np.float32)
    if kind == "degree_one_hot":
        return np.eye(dim, dtype=np.float32)[np.minimum(degrees, dim - 1)]
    if kind == "constant":
        return np.ones((n, 1), np.float32)
    if kind == "gaussian":
        return np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float32)
    if kind == "laplacian":
        lap = nx.normalized_laplacian_matrix(nx.Graph(G.to_undirected()), nodelist=list(G))
        values, vectors = np.linalg.eigh(lap.toarray())
        vectors = vectors[:, values > 1e-8][:, :dim]
        flip = np.sign(vectors[np.argmax(np.abs(vectors), axis=0), np.arange(vectors.shape[1])])
        vectors = vectors * np.where(flip == 0, 1, flip)
        out = np.zeros((n, dim), np.float32)
        out[:, : vectors.shape[1]] = vectors
        return out
    raise ValueError(f"unknown features {kind!r}; choose one of {FEATURES}")


def split_per_class(labels: np.ndarray, per_class: int, seed: int, *,
                    val_fraction: float = 0.5, test_fraction: float = 0.5):
    """Seeded masks: ``per_class`` training nodes per class; of the other
    labelled nodes, ``val_fraction`` go to validation and ``test_fraction`` to
    test (the rest to neither). Label -1 means unlabelled: in no split."""
    if val_fraction < 0 or test_fraction < 0 or val_fraction + test_fraction > 1:
        raise ValueError("val_fraction and test_fraction must be >= 0 and sum to <= 1")
    rng = np.random.default_rng(seed)
    train = np.zeros(labels.shape, bool)
    for c in np.unique(labels[labels >= 0]):
        nodes = np.flatnonzero(labels == c)
        train[rng.choice(nodes, size=min(per_class, len(nodes)), replace=False)] = True
    rest = rng.permutation(np.flatnonzero((labels >= 0) & ~train))
    n_val = int(round(val_fraction * len(rest)))
    n_test = int(round(test_fraction * len(rest)))
    val = np.zeros(labels.shape, bool)
    test = np.zeros(labels.shape, bool)
    val[rest[:n_val]] = True
    test[rest[n_val:n_val + n_test]] = True
    return train, val, test


def load_graph(name: str = "karate", *, features: str | None = None, seed: int = 0,
               train_per_class: int = 4, difficulty: float = 0.0) -> Graph:
    """A preset as a training-ready :class:`gnncore.Graph` (features, labels, split).

    ``features``: a kind from :data:`FEATURES`; ``None`` means the preset's
    ``default_features``. ``file`` (the graph's own features) exists only for
    the file-backed presets (``ValueError`` naming ``features`` otherwise).
    A file-backed preset always gets its file's split (for Cora and CiteSeer the
    public one); the others a seeded ``train_per_class`` split.
    """
    if name not in PRESETS:
        raise ValueError(f"unknown graph {name!r}; choose one of {sorted(PRESETS)}")
    preset = PRESETS[name]
    features = preset.default_features if features is None else features
    if features not in FEATURES:
        raise ValueError(f"unknown features {features!r}; choose one of {FEATURES}")
    gf = preset_file(name)
    if features == "file" and (gf is None or gf.features is None):
        raise ValueError(f"features 'file' means the graph's own node features, and {name!r} "
                         f"has none; the presets with features: {', '.join(_with_features())}")
    if gf is not None:
        if not 0.0 <= difficulty <= 1.0:
            raise ValueError(f"difficulty must be in [0, 1]; got {difficulty}")
        return gf.to_graph(features=features, seed=seed, train_per_class=train_per_class)
    G, labels = preset_graph(name, seed=seed, difficulty=difficulty)
    train, val, test = split_per_class(labels, train_per_class, seed)
    weight = "weight" if all("weight" in d for _, _, d in G.edges(data=True)) else None
    g = gnncore.from_networkx(G, feature_attrs=None, label_attr=None, weight_attr=weight)
    x = build_features(G, features, seed=seed)
    return gnncore.Graph.from_arrays(g.edge_index, x, y=labels, edge_weight=g.edge_weight,
                                     train_mask=train, val_mask=val, test_mask=test)


# ------------------------------------------------- graph classification data
def _cycle_or_tree(rng, label):
    n = int(rng.integers(5, 11))
    if label == 0:
        return nx.cycle_graph(n)
    return nx.random_labeled_tree(n, seed=int(rng.integers(2**31)))


def _triangle(rng, label):
    n = int(rng.integers(6, 11))
    if label == 1:  # has a triangle: a tree plus one chord closing a triangle
        G = nx.path_graph(n)
        G.add_edge(0, 2)
        return G
    return nx.cycle_graph(n)  # n >= 6: triangle-free


def _communities_task(rng, label):
    size = int(rng.integers(4, 7))
    if label == 0:
        return nx.complete_graph(2 * size)
    G = nx.disjoint_union(nx.complete_graph(size), nx.complete_graph(size))
    G.add_edge(0, size)
    return G


GRAPH_TASKS = {
    "cycle_vs_tree": ("Cycle (0) or tree (1)", _cycle_or_tree),
    "triangle": ("Triangle-free (0) or has a triangle (1)", _triangle),
    "communities": ("One community (0) or two joined by a bridge (1)", _communities_task),
}


def graph_classification_dataset(name: str, num_graphs: int = 100, *, seed: int = 0):
    """``[(Graph, label)]``: many small graphs with one label each, classes
    balanced and shuffled. Node features: constant 1 (structure alone decides)."""
    if name not in GRAPH_TASKS:
        raise ValueError(f"unknown task {name!r}; choose one of {sorted(GRAPH_TASKS)}")
    rng = np.random.default_rng(seed)
    make = GRAPH_TASKS[name][1]
    labels = rng.permutation(np.arange(num_graphs) % 2)
    out = []
    for label in labels:
        G = make(rng, int(label))
        g = gnncore.from_networkx(G, feature_attrs=None, label_attr=None, weight_attr=None)
        x = np.ones((g.num_nodes, 1), np.float32)
        out.append((gnncore.Graph.from_arrays(g.edge_index, x), int(label)))
    return out


#: node features that mean the same thing in every graph of a dataset
#: (``one_hot`` node ids do not: their width is the graph's size)
GRAPH_FEATURES = ("degree_one_hot", "degree", "constant", "gaussian", "laplacian")


def load_graph_dataset(name: str, *, features: str = "degree_one_hot", seed: int = 0,
                       num_graphs: int = 120):
    """A graph-classification task as ``(graphs, labels)``: each graph gets the
    node ``features`` (one of :data:`GRAPH_FEATURES`)."""
    from gnncore import to_networkx

    if features not in GRAPH_FEATURES:
        raise ValueError(f"features {features!r} cannot be used across graphs of different "
                         f"sizes; choose one of {GRAPH_FEATURES}")
    graphs, labels = [], []
    for i, (g, label) in enumerate(graph_classification_dataset(name, num_graphs, seed=seed)):
        x = build_features(to_networkx(g, undirected=True), features, seed=seed + i)
        graphs.append(gnncore.Graph.from_arrays(g.edge_index, x, num_nodes=g.num_nodes))
        labels.append(label)
    return graphs, np.asarray(labels, np.int32)


def split_graphs(num_graphs: int, seed: int, fractions=(0.6, 0.2, 0.2)):
    """Seeded train/val/test masks over ``num_graphs`` graphs."""
    order = np.random.default_rng(seed).permutation(num_graphs)
    n_train = int(round(fractions[0] * num_graphs))
    n_val = int(round(fractions[1] * num_graphs))
    masks = [np.zeros(num_graphs, bool) for _ in range(3)]
    masks[0][order[:n_train]] = True
    masks[1][order[n_train:n_train + n_val]] = True
    masks[2][order[n_train + n_val:]] = True
    return tuple(masks)

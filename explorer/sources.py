"""Graph sources for the engine. For now the default graph only: Zachary's
karate club (labels: the ``club`` attribute), with seeded features and split.
(Presets, generators, drawing and file import arrive with the graph-sources
issue and plug in here.)"""

from __future__ import annotations

import networkx as nx
import numpy as np

from gnncore import Graph, from_networkx

__all__ = ["GRAPHS", "build_features", "load_graph", "split_per_class"]


def _karate() -> tuple[nx.Graph, np.ndarray]:
    G = nx.karate_club_graph()
    clubs = sorted({G.nodes[n]["club"] for n in G})
    labels = np.asarray([clubs.index(G.nodes[n]["club"]) for n in G], np.int32)
    return G, labels


GRAPHS = {"karate": ("Zachary's karate club, labelled by the club each member joined", _karate)}


def build_features(G: nx.Graph, kind: str) -> np.ndarray:
    """Node features: ``one_hot`` node id, ``degree`` (scalar) or ``constant``."""
    n = G.number_of_nodes()
    if kind == "one_hot":
        return np.eye(n, dtype=np.float32)
    if kind == "degree":
        return np.asarray([[float(d)] for _, d in G.degree()], np.float32)
    if kind == "constant":
        return np.ones((n, 1), np.float32)
    raise ValueError(f"unknown features {kind!r}; choose one_hot, degree or constant")


def split_per_class(labels: np.ndarray, per_class: int, seed: int):
    """Seeded masks: ``per_class`` training nodes per class; the other labelled
    nodes are split evenly into validation and test. Label -1 is in no split."""
    rng = np.random.default_rng(seed)
    train = np.zeros(labels.shape, bool)
    for c in np.unique(labels[labels >= 0]):
        nodes = np.flatnonzero(labels == c)
        train[rng.choice(nodes, size=min(per_class, len(nodes)), replace=False)] = True
    rest = rng.permutation(np.flatnonzero((labels >= 0) & ~train))
    val = np.zeros(labels.shape, bool)
    test = np.zeros(labels.shape, bool)
    val[rest[: len(rest) // 2]] = True
    test[rest[len(rest) // 2:]] = True
    return train, val, test


def load_graph(name: str = "karate", *, features: str = "one_hot", seed: int = 0,
               train_per_class: int = 4) -> Graph:
    """The named graph as a :class:`gnncore.Graph` with features, labels and split."""
    if name not in GRAPHS:
        raise ValueError(f"unknown graph {name!r}; choose one of {sorted(GRAPHS)}")
    G, labels = GRAPHS[name][1]()
    train, val, test = split_per_class(labels, train_per_class, seed)
    g = from_networkx(G, feature_attrs=None, label_attr=None, weight_attr=None)
    return Graph.from_arrays(g.edge_index, build_features(G, features), y=labels,
                             train_mask=train, val_mask=val, test_mask=test)

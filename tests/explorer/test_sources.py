"""Presets, generators, features and splits: deterministic and well-formed."""

import networkx as nx
import numpy as np
import pytest

from explorer import sources
from explorer.sources import (
    FEATURES,
    GRAPH_TASKS,
    PRESETS,
    build_features,
    graph_classification_dataset,
    load_graph,
    preset_file,
    preset_graph,
    split_per_class,
)


def test_at_least_ten_presets_each_described():
    assert len(PRESETS) >= 10
    for name, preset in PRESETS.items():
        assert preset.description and "\n" not in preset.description, name


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_presets_are_deterministic_and_training_ready(name):
    a = load_graph(name, seed=3)
    b = load_graph(name, seed=3)
    assert a.equals(b)
    G, labels = preset_graph(name, seed=3)
    assert labels.shape == (G.number_of_nodes(),) == (a.num_nodes,)
    assert a.num_classes() >= 2
    assert int(a.train_mask.sum()) >= 2
    masks = np.stack([np.asarray(a.train_mask), np.asarray(a.val_mask), np.asarray(a.test_mask)])
    assert masks.sum(0).max() <= 1  # disjoint


def test_named_labels_and_weights():
    G, labels = preset_graph("karate")
    assert labels.tolist().count(0) == 17 and labels.tolist().count(1) == 17
    assert load_graph("karate").edge_weight is not None  # interaction counts
    _, labels = preset_graph("davis_southern_women")
    assert sorted(set(labels.tolist())) == [0, 1] and labels.tolist().count(0) == 18
    _, labels = preset_graph("star")
    assert labels.tolist().count(labels[0]) == 1  # the centre is the odd one out


def test_difficulty_knob():
    easy, _ = preset_graph("sbm", seed=1, difficulty=0.0)
    hard, _ = preset_graph("sbm", seed=1, difficulty=1.0)
    assert hard.number_of_edges() > 1.5 * easy.number_of_edges()
    plain, _ = preset_graph("ring_of_cliques", difficulty=0.0)
    noisy, _ = preset_graph("ring_of_cliques", difficulty=1.0)
    assert noisy.number_of_edges() > plain.number_of_edges()
    with pytest.raises(ValueError, match="difficulty must be in \\[0, 1\\]"):
        preset_graph("sbm", difficulty=2.0)
    with pytest.raises(ValueError, match="unknown graph 'mars'"):
        preset_graph("mars")


@pytest.mark.parametrize("kind", [k for k in FEATURES if k != "file"])
def test_features(kind):
    G = nx.karate_club_graph()
    x = build_features(G, kind, seed=1, dim=6)
    assert x.dtype == np.float32 and x.shape[0] == 34 and np.all(np.isfinite(x))
    np.testing.assert_array_equal(x, build_features(G, kind, seed=1, dim=6))
    if kind == "degree_one_hot":
        assert np.all(x.sum(1) == 1) and x.shape[1] == 6
    if kind == "laplacian":
        np.testing.assert_allclose(x.T @ x, np.eye(6), atol=1e-5)  # orthonormal columns
    if kind == "degree":
        assert x[:, 0].tolist() == [d for _, d in G.degree()]
    with pytest.raises(ValueError, match="unknown features"):
        build_features(G, "colour")


def test_laplacian_features_zero_padded_on_tiny_graphs():
    x = build_features(nx.path_graph(3), "laplacian", dim=8)
    assert x.shape == (3, 8) and np.all(x[:, 2:] == 0)


def test_split_per_class():
    labels = np.asarray([0] * 10 + [1] * 6 + [-1] * 4)
    train, val, test = split_per_class(labels, 3, seed=5, val_fraction=0.25, test_fraction=0.5)
    assert train[labels == 0].sum() == 3 and train[labels == 1].sum() == 3
    assert not (train | val | test)[labels == -1].any()
    assert (val.sum(), test.sum()) == (2, 5)  # of the 10 remaining labelled nodes
    again = split_per_class(labels, 3, seed=5, val_fraction=0.25, test_fraction=0.5)
    assert all(np.array_equal(a, b) for a, b in zip((train, val, test), again))
    with pytest.raises(ValueError, match="sum to <= 1"):
        split_per_class(labels, 3, 0, val_fraction=0.8, test_fraction=0.5)


@pytest.mark.parametrize("task", sorted(GRAPH_TASKS))
def test_graph_classification_datasets(task):
    data = graph_classification_dataset(task, 40, seed=2)
    labels = [label for _, label in data]
    assert labels.count(0) == labels.count(1) == 20
    again = graph_classification_dataset(task, 40, seed=2)
    assert all(g.equals(h) and a == b for (g, a), (h, b) in zip(data, again))
    for graph, label in data:
        G = nx.Graph()
        G.add_nodes_from(range(graph.num_nodes))
        G.add_edges_from(np.asarray(graph.edge_index).T.tolist())
        if task == "cycle_vs_tree":
            assert (nx.is_tree(G) if label else all(d == 2 for _, d in G.degree()))
        elif task == "triangle":
            assert (sum(nx.triangles(G).values()) > 0) == bool(label)
        else:
            parts = nx.community.greedy_modularity_communities(G)
            assert (len(parts) == 2) == bool(label)


# ------------------------------------------------------- file-backed presets
def test_file_presets_declare_their_file_and_features():
    assert {n for n, p in PRESETS.items() if p.file} == {"cora", "citeseer"}
    assert PRESETS["cora"].default_features == "file" and PRESETS["cora"].file == "cora.npz"
    assert all(p.default_features == "one_hot" for p in PRESETS.values() if not p.file)
    assert preset_file("karate") is None
    assert preset_file("cora") is preset_file("cora")  # cached
    with pytest.raises(ValueError, match="unknown graph 'mars'"):
        preset_file("mars")


def test_preset_file_arrays_are_read_only():
    gf = preset_file("cora")
    with pytest.raises(ValueError, match="read-only"):
        gf.labels[0] = 3
    with pytest.raises(ValueError, match="read-only"):
        gf.split[0][0] = False


def test_file_features_only_where_the_file_has_them():
    with pytest.raises(ValueError, match="features 'file' .*'karate' has none; the presets "
                                         "with features: cora, citeseer"):
        load_graph("karate", features="file")
    with pytest.raises(ValueError, match="features 'file' are the graph's own node features; "
                                         "there is nothing to build"):
        build_features(nx.karate_club_graph(), "file")
    with pytest.raises(ValueError, match="unknown features 'colour'"):
        load_graph("karate", features="colour")


def test_default_features_come_from_the_preset():
    assert load_graph("karate").x.shape == (34, 34)  # one_hot
    assert load_graph("cora").x.shape == (2708, 1433)  # the file's own


def test_a_file_preset_keeps_its_public_split_whatever_the_features_and_seed():
    cora = preset_file("cora")
    for graph in (load_graph("cora", features="degree", seed=5, train_per_class=3),
                  load_graph("cora", features="constant", seed=1, difficulty=1.0)):
        assert graph.x.shape[1] == 1
        for mask, expected in zip((graph.train_mask, graph.val_mask, graph.test_mask),
                                  cora.split):
            np.testing.assert_array_equal(np.asarray(mask), expected)


def test_preset_graph_of_a_file_preset_has_every_node():
    G, labels = preset_graph("citeseer")
    assert list(G) == list(range(3327)) and G.number_of_edges() == 4552
    assert int((labels == -1).sum()) == 15 and nx.number_of_isolates(G) >= 15
    labels[0] = 99  # a copy: the cached file is untouched
    assert preset_file("citeseer").labels[0] != 99


def test_a_missing_data_file_is_named(tmp_path, monkeypatch):
    monkeypatch.setattr(sources, "ASSETS", tmp_path)
    preset_file.cache_clear()
    try:
        with pytest.raises(ValueError, match=f"needs its data file {tmp_path / 'cora.npz'}, "
                                             "which is missing"):
            load_graph("cora")
        with pytest.raises(ValueError, match="cora.npz, which is missing"):
            preset_graph("cora")
    finally:
        preset_file.cache_clear()

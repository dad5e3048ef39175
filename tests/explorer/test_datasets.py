"""The shipped citation graphs (assets/cora.npz, assets/citeseer.npz): presets,
exact contents, the public split, and training on them."""

import numpy as np
import pytest
from conftest import REPO, SHARED_DATASETS

from explorer.config import RunConfig
from explorer.drawing import from_preset
from explorer.engine import Run
from explorer.engine.tasks import NodeTask, shape_change
from explorer.graphio import load_graph_file
from explorer.sources import PRESETS, load_graph, preset_file, preset_graph
from gnncore import SparseFeatures

ASSETS = REPO / "assets"

# name: nodes, undirected edges, features, classes, train / val / test
EXPECTED = {"cora": (2708, 5278, 1433, 7, (140, 500, 1000)),
            "citeseer": (3327, 4552, 3703, 6, (120, 500, 1000))}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_preset_counts_and_public_split(name):
    nodes, edges, features, classes, sizes = EXPECTED[name]
    graph = load_graph(name, features="file")
    assert (graph.num_nodes, graph.num_edges) == (nodes, 2 * edges)  # both directions
    assert graph.x.shape == (nodes, features) and graph.num_classes() == classes
    masks = [np.asarray(m) for m in (graph.train_mask, graph.val_mask, graph.test_mask)]
    assert tuple(int(m.sum()) for m in masks) == sizes
    assert np.stack(masks).sum(0).max() == 1  # disjoint
    y = np.asarray(graph.y)
    assert np.all(np.bincount(y[masks[0]], minlength=classes) == 20)  # 20 per class
    assert np.all(y[np.any(masks, axis=0)] >= 0)  # every split node is labelled
    G, labels = preset_graph(name)
    assert (G.number_of_nodes(), G.number_of_edges()) == (nodes, edges)
    assert np.array_equal(labels, y)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_load_graph_matches_the_npz_exactly(name):
    data = np.load(ASSETS / f"{name}.npz", allow_pickle=False)
    graph = load_graph(name, features="file", seed=7, train_per_class=2)
    np.testing.assert_array_equal(np.asarray(graph.x), data["x"].astype(np.float32))
    np.testing.assert_array_equal(np.asarray(graph.y), data["y"])
    for mask, key in zip((graph.train_mask, graph.val_mask, graph.test_mask),
                         ("train_mask", "val_mask", "test_mask")):
        np.testing.assert_array_equal(np.asarray(mask), data[key])
    assert bool(data["undirected"])
    ei = data["edge_index"]
    expected = {tuple(e) for e in ei.T.tolist()} | {tuple(e) for e in ei[::-1].T.tolist()}
    got = {tuple(e) for e in np.asarray(graph.edge_index).T.tolist()}
    assert got == expected


def test_citeseer_unlabelled_nodes_have_no_words_and_no_split():
    gf = preset_file("citeseer")
    unlabelled = np.flatnonzero(gf.labels == -1)
    assert unlabelled.size == 15
    assert not gf.features[unlabelled].any()  # Planetoid has no words for them either
    assert not any(mask[unlabelled].any() for mask in gf.split)
    degree = np.bincount(gf.edge_index.ravel(), minlength=gf.num_nodes)
    assert int((degree == 0).sum()) == 48 and degree[unlabelled].min() >= 1


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_assets_load_with_default_limits_and_match_the_shared_copy(name):
    gf = load_graph_file(ASSETS / f"{name}.npz")
    assert gf.num_nodes == EXPECTED[name][0] and not gf.directed and gf.warnings == ()
    shared = SHARED_DATASETS / f"{name}.npz"
    if shared.exists():
        assert (ASSETS / f"{name}.npz").read_bytes() == shared.read_bytes()


def test_assets_readme_names_source_and_licence():
    text = (ASSETS / "README.md").read_text()
    for needle in ("kimiyoung/planetoid", "MIT", "Copyright (c) 2016 Zhilin Yang", "81.5",
                   "140 / 500 / 1000", "120 / 500 / 1000", "allow_pickle=False"):
        assert needle in text, needle


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_drawing_of_a_dataset_has_no_layout_and_rebuilds_the_same_graph(name):
    drawing = from_preset(name)  # no spring layout over thousands of nodes
    gf = preset_file(name)
    assert drawing.num_nodes == gf.num_nodes and all(p is None for p in drawing.positions)
    assert PRESETS[name].file and len(drawing.edges) == EXPECTED[name][1]
    # what the workspace does: the drawing plus the file's features and split
    rebuilt = drawing.to_graph(x=gf.features, split=gf.split)
    assert rebuilt.equals(load_graph(name, features="file"))


def test_cora_trains_to_a_useful_accuracy_quickly():
    run = Run(RunConfig(graph="cora", features="file", epochs=30))
    # its word features are 1.3 % non-zero: the step takes them as CSR
    # (SparseFeatures), so the first layer's product costs the non-zeros only
    assert isinstance(run.inputs.x, SparseFeatures) and run.inputs.x.shape == (2708, 1433)
    layout = {r["name"]: r["shape"] for r in run.layout()}  # the Devices tab's table
    nnz = int(np.count_nonzero(np.asarray(run.graph.x)))
    assert layout["inputs.x.values"] == (nnz,) and layout["inputs.x.pattern.t_indptr"] == (1434,)
    run.train()
    last = run.history[-1]
    assert last.train_acc > 0.9 and last.test_acc > 0.7, last
    # the trained model gives the same logits on the dense matrix
    logits = np.asarray(run.logits())
    inputs = run.inputs
    run.model.eval()
    try:
        dense = run.model(run.graph.x, inputs.adj, inputs.edge_weight,
                          node_mask=inputs.node_mask)
    finally:
        run.model.train()
    np.testing.assert_allclose(logits, np.asarray(dense), atol=1e-4)


def test_only_large_mostly_zero_features_go_in_as_csr_and_their_changes_retrace():
    cora = load_graph("cora", features="file")
    before = NodeTask(cora).inputs
    # same nodes and edges, one more non-zero: the CSR arrays grow, so the step
    # traces again, and says why
    x = np.asarray(cora.x).copy()
    x[0, int(np.flatnonzero(x[0] == 0)[0])] = 1.0
    after = NodeTask(cora.replace(x=x)).inputs
    nnz = int(np.count_nonzero(x))
    assert shape_change(before, after) == f"shapes changed: feature non-zeros {nnz - 1} -> {nnz}"
    # bucket padding keeps the shapes across edits, so its features stay dense
    padded = NodeTask(cora, bucket_padding=True).inputs
    assert not isinstance(padded.x, SparseFeatures)
    assert shape_change(before, padded).startswith("shapes changed: nodes 2708 -> 4096")
    assert shape_change(NodeTask(cora.replace(x=x[:, :100])).inputs, NodeTask(
        cora.replace(x=x[:, :100] + 1)).inputs) == "inputs changed: the features now go in dense"
    # a small graph's one-hot ids (karate club: 34 x 34) are under the size floor
    assert not isinstance(NodeTask(load_graph("karate")).inputs.x, SparseFeatures)


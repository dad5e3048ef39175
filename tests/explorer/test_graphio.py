"""Graph files: round trips, every bad-input class named, fuzzing, limits."""

import json

import numpy as np
import pytest
from conftest import SHARED_DATASETS
from hypothesis import given, settings
from hypothesis import strategies as st

from explorer.graphio import (
    GraphFile,
    GraphFileError,
    Limits,
    export_graph,
    export_node_csv,
    load_graph_file,
)

# alice trains, bob validates, dave tests, carol (unlabelled) is in no split
SPLIT = (np.asarray([True, False, False, False]), np.asarray([False, True, False, False]),
         np.asarray([False, False, False, True]))


def sample(directed=False, split=SPLIT):
    return GraphFile(names=("alice", "bob", "carol", "dave"),
                     edge_index=np.asarray([[0, 1, 2, 3], [1, 2, 0, 0]]),
                     weights=np.asarray([1.5, 2.0, 0.25, 3.0], np.float32),
                     labels=np.asarray([0, 1, -1, 1], np.int32),
                     features=np.asarray([[1, 0], [0, 1], [1, 1], [0.5, 2]], np.float32),
                     directed=directed, split=split)


def splits_equal(a, b):
    return (a is None and b is None) or (
        a is not None and b is not None and all(np.array_equal(x, y) for x, y in zip(a, b)))


@pytest.mark.parametrize("fmt, ext", [("edgelist", ".edgelist"), ("csv", ".csv"),
                                      ("json", ".json"), ("npz", ".npz"),
                                      ("graphml", ".graphml"), ("gml", ".gml")])
def test_round_trip(fmt, ext):
    g = sample(directed=fmt in ("json", "graphml"))
    if fmt in ("graphml", "gml"):  # names, edges, weights, integer labels, direction, split
        g = GraphFile(names=g.names, edge_index=g.edge_index, weights=g.weights,
                      labels=g.labels, directed=g.directed, split=g.split)
    if fmt in ("edgelist", "csv"):  # these formats hold names, edges and weights only
        g = GraphFile(names=g.names, edge_index=g.edge_index, weights=g.weights)
    if fmt == "npz":  # ids are indices; weights are not part of the schema
        g = GraphFile(names=("0", "1", "2", "3"), edge_index=g.edge_index, labels=g.labels,
                      features=g.features, split=g.split)
    back = load_graph_file("g" + ext, export_graph(g, fmt))
    assert back.equals(g), fmt
    assert splits_equal(back.split, g.split), fmt
    graph = back.to_graph()
    assert graph.num_nodes == 4
    if g.split is not None:  # the file's split, not a per-class one
        assert splits_equal((graph.train_mask, graph.val_mask, graph.test_mask), g.split)


@pytest.mark.parametrize("fmt", ["edgelist", "csv"])
def test_round_trip_with_the_node_csv(fmt):
    g = sample()
    back = load_graph_file("g." + fmt, export_graph(g, fmt), node_csv=export_node_csv(g))
    assert back.equals(g) and splits_equal(back.split, SPLIT)
    plain = sample(split=None)
    again = load_graph_file("g." + fmt, export_graph(plain, fmt), node_csv=export_node_csv(plain))
    assert again.equals(plain) and again.split is None


def test_round_trip_without_a_split_writes_none():
    g = sample(split=None)
    for fmt, ext in (("json", ".json"), ("npz", ".npz"), ("graphml", ".graphml"),
                     ("gml", ".gml")):
        assert load_graph_file("g" + ext, export_graph(g, fmt)).split is None, fmt
    data = json.loads(export_graph(g, "json"))
    assert all("split" not in node for node in data["nodes"])


def test_node_csv_adds_labels_features_and_isolated_nodes():
    edges = b"source,target\nalice,bob\n"
    nodes = b"id,label,f1,f2\nalice,0,1,2\nbob,1,3,4\nzed,,5,6\n"
    g = load_graph_file("g.csv", edges, node_csv=nodes)
    assert g.names == ("alice", "bob", "zed")
    assert g.labels.tolist() == [0, 1, -1] and g.features.shape == (3, 2)
    graph = g.to_graph()
    assert graph.num_nodes == 3 and graph.num_edges == 2


@pytest.mark.parametrize("name, data, message", [
    ("g.edgelist", b"a b\nc\n", "g.edgelist line 2: needs 'source target"),
    ("g.edgelist", b"a b 1 2\n", "line 1: too many columns"),
    ("g.edgelist", b"a b x\n", "line 1: weight 'x' is not a number"),
    ("g.edgelist", b"a b nan\n", "line 1: weight is nan; NaN and Inf"),
    ("g.edgelist", b"a b 1\nb c\n", "line 2: 2 columns, but earlier lines had 3"),
    ("g.edgelist", b"", "the file is empty"),
    ("g.edgelist", b"# only a comment\n", "the graph has no nodes"),
    ("g.edgelist", b"\xff\xfe a b", "not UTF-8 text"),
    ("g.edgelist", b"a\x00b\x00", "binary data"),
    ("g.csv", b"from,to\na,b\n", "line 1: header must be 'source,target[,weight]'"),
    ("g.csv", b"source,target\na,b,c\n", "line 2: 3 columns, expected 2"),
    ("g.json", b"{nodes: 1}", "line 1: invalid JSON"),
    ("g.json", b'{"nodes": [{"id": 1, "label": 0.5}]}', "nodes[0]: label 0.5 is not an integer"),
    ("g.json", b'{"nodes": [{"id": 1}], "links": [{"source": 1, "target": 9}]}',
     "links[0]: target 9 is not a node id"),
    ("g.json", b'{"nodes": [{"id": 1, "x": [1]}, {"id": 2, "x": [1, 2]}]}', "ragged"),
    ("g.gexf", b"<gexf/>", "unknown extension"),
    ("g.graphml", b'<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "aaaa">]><graphml/>',
     "DOCTYPE/ENTITY declarations are not allowed"),
    ("g.graphml", b"<graphml><graph><node", "invalid GraphML"),
    ("g.gml", b"graph [ node [ id 1 ] edge [ source 1 target 7 ] ]", "invalid GML"),
    ("g.gml", b'graph [ node [ id 1 label "a" y "x" ] ]', "label 'x' is not an integer"),
    ("g.npz", b"PK not really", "not a valid .npz archive"),
])
def test_bad_input_names_what_and_where(name, data, message):
    with pytest.raises(GraphFileError, match=message.replace("[", "\\[").replace("]", "\\]")
                       .replace("(", "\\(").replace(")", "\\)").replace("?", "\\?")):
        load_graph_file(name, data)


def _npz(**arrays):
    import io
    out = io.BytesIO()
    np.savez(out, **arrays)
    return out.getvalue()


@pytest.mark.parametrize("arrays, message", [
    ({"edge_index": np.asarray([[0, -1], [1, 0]])}, "edge_index: id -1 is out of range"),
    ({"edge_index": np.asarray([[0, 5], [1, 0]]), "y": np.zeros(3, np.int32)},
     "edge_index: id 5 is out of range for 3 nodes"),
    ({"edge_index": np.asarray([[0.0], [1.0]])}, "field edge_index: must be integers"),
    ({"edge_index": np.asarray([[0], [1]]), "x": np.asarray([[np.nan], [1.0]])},
     "field x: contains NaN"),
    ({"edge_index": np.asarray([[0], [1]]), "y": np.asarray([0.5, 1.0])}, "field y: must be"),
    ({"x": np.ones((2, 2))}, "missing the 'edge_index' array"),
    ({"edge_index": np.asarray([[0], [1]]), "names": np.asarray([{"a": 1}], dtype=object)},
     "pickled objects"),
])
def test_bad_npz_fields(arrays, message):
    with pytest.raises(GraphFileError, match=message):
        load_graph_file("bad.npz", _npz(**arrays))


def test_duplicates_and_self_loops_counted_and_optionally_dropped():
    data = b"a b\nb a\na b\nc c\n"
    kept = load_graph_file("g.edgelist", data)
    assert kept.edge_index.shape[1] == 4
    assert kept.warnings == ("g.edgelist: 2 duplicate edges kept", "g.edgelist: 1 self loops kept")
    dropped = load_graph_file("g.edgelist", data, drop_duplicates=True, drop_self_loops=True)
    assert dropped.edge_index.tolist() == [[0], [1]]


def test_limits_are_checked_before_building():
    with pytest.raises(GraphFileError, match="over the limit of 10"):
        load_graph_file("g.edgelist", b"a b\n" * 10, limits=Limits(max_bytes=10))
    with pytest.raises(GraphFileError, match="more than 2 edges"):
        load_graph_file("g.edgelist", b"a b\nb c\nc d\n", limits=Limits(max_edges=2))
    with pytest.raises(GraphFileError, match="more than 2 nodes"):
        load_graph_file("g.edgelist", b"a b\nb c\n", limits=Limits(max_nodes=2))


@settings(max_examples=150, deadline=None)
@given(st.sampled_from([".edgelist", ".csv", ".json", ".npz", ".graphml", ".gml"]),
       st.binary(max_size=300))
def test_fuzz_random_bytes_only_raise_graph_file_errors(ext, data):
    try:
        load_graph_file("fuzz" + ext, data)
    except GraphFileError:
        pass


VALID = {ext: export_graph(sample(), ext[1:]) for ext in
         (".edgelist", ".csv", ".json", ".npz", ".graphml", ".gml")}


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(sorted(VALID)), st.data())
def test_fuzz_mutated_valid_files_only_raise_graph_file_errors(ext, data):
    raw = bytearray(VALID[ext])
    for _ in range(data.draw(st.integers(1, 8))):
        pos = data.draw(st.integers(0, len(raw) - 1))
        raw[pos] = data.draw(st.integers(0, 255))
    try:
        load_graph_file("mutated" + ext, bytes(raw))
    except GraphFileError:
        pass


@pytest.mark.parametrize("name, nodes, edges", [("cora.npz", 2708, 10556),
                                                ("citeseer.npz", 3327, 9104)])
def test_shared_datasets_load_through_npz(name, nodes, edges):
    path = SHARED_DATASETS / name
    if not path.exists():
        pytest.skip(f"../shared/datasets/{name} is not available")
    g = load_graph_file(path)
    graph = g.to_graph()
    assert (graph.num_nodes, graph.num_edges) == (nodes, edges)
    assert graph.train_mask is not None and int(np.asarray(graph.y).max()) >= 5


def test_json_is_node_link():
    data = json.loads(export_graph(sample(directed=True), "json"))
    assert data["directed"] is True and data["links"][0] == {"source": "alice",
                                                               "target": "bob", "weight": 1.5}


def test_feature_and_label_choices_and_drawing():
    g = sample()
    assert np.array_equal(np.asarray(g.to_graph().x), g.features)
    assert g.to_graph(features="degree").x.shape == (4, 1)
    community = np.asarray(g.to_graph(labels="community").y)
    assert community.min() >= 0
    with pytest.raises(GraphFileError, match="features: choose 'file'"):
        g.to_graph(features="colour")
    drawing = g.to_drawing()
    assert drawing.names == g.names and drawing.labels == (0, 1, -1, 1)
    assert all(p is not None for p in drawing.positions) and len(drawing.edges) == 4
    plain = load_graph_file("g.edgelist", b"a b\nb c\n").to_graph()
    assert plain.x.shape == (3, 3)  # no features in the file: one-hot ids


@pytest.mark.parametrize("nodes, message", [
    (b"id,label,f1\na,0,1\nb,1\n", "node CSV line 3: 2 columns, expected 3 \\(ragged"),
    (b"id,label\na,0.5\n", "node CSV line 2: label '0.5' is not an integer"),
    (b"id,label,f1\na,0,inf\n", "node CSV line 2: feature is inf"),
    (b"name,class\na,0\n", "node CSV line 1: header must start with 'id,label'"),
])
def test_bad_node_csv(nodes, message):
    with pytest.raises(GraphFileError, match=message):
        load_graph_file("g.csv", b"source,target\na,b\n", node_csv=nodes)


# ------------------------------------------------------------------ splits
def test_npz_masks_are_kept_and_a_missing_one_is_empty():
    edges = np.asarray([[0, 1, 2], [1, 2, 3]])
    g = load_graph_file("g.npz", _npz(edge_index=edges, y=np.zeros(4, np.int32),
                                      train_mask=np.asarray([1, 0, 0, 0], np.uint8),
                                      test_mask=np.asarray([False, False, True, True])))
    assert [m.tolist() for m in g.split] == [[True, False, False, False], [False] * 4,
                                             [False, False, True, True]]
    assert all(m.dtype == bool for m in g.split)
    assert load_graph_file("g.npz", _npz(edge_index=edges)).split is None
    graph = g.to_graph()
    assert np.asarray(graph.train_mask).tolist() == [True, False, False, False]
    assert not np.asarray(graph.val_mask).any()


def test_npz_masks_alone_give_the_node_count():
    g = load_graph_file("g.npz", _npz(edge_index=np.asarray([[0], [1]]),
                                      val_mask=np.asarray([False, True, False])))
    assert g.num_nodes == 3 and g.split[1].tolist() == [False, True, False]


@pytest.mark.parametrize("masks, message", [
    ({"val_mask": np.zeros(3, bool)}, "bad.npz: field 'val_mask': 3 entries for 4 nodes"),
    ({"train_mask": np.zeros((4, 1), bool)},
     "bad.npz: field 'train_mask': must hold one entry per node \\(shape \\[4\\]\\)"),
    ({"test_mask": np.asarray(True)}, "field 'test_mask': must hold one entry per node"),
    ({"test_mask": np.zeros(4, np.float32)},
     "field 'test_mask': must be bool \\(or integers 0/1\\), got float32"),
    ({"val_mask": np.asarray([0, 2, 1, 0])}, "field 'val_mask': holds 2; an integer mask"),
    ({"val_mask": np.asarray(["a", "b", "c", "d"])}, "field 'val_mask': must be bool"),
    ({"train_mask": np.asarray([True, True, False, False]),
      "test_mask": np.asarray([False, True, True, False])},
     "bad.npz: fields 'train_mask' and 'test_mask' both hold node 1 \\(1 nodes in both\\)"),
])
def test_bad_npz_masks_name_the_field(masks, message):
    with pytest.raises(GraphFileError, match=message):
        load_graph_file("bad.npz", _npz(edge_index=np.asarray([[0, 1], [1, 2]]),
                                        y=np.zeros(4, np.int32), **masks))


def test_node_csv_split_column():
    nodes = b"id,label,split,f1\na,0,train,1\nb,1,VAL,2\nc,0,,3\nd,1, Test ,4\n"
    g = load_graph_file("g.csv", b"source,target\na,b\nb,c\nc,d\n", node_csv=nodes)
    assert [m.tolist() for m in g.split] == [[True, False, False, False],
                                             [False, True, False, False],
                                             [False, False, False, True]]
    assert g.features.tolist() == [[1], [2], [3], [4]]  # the split is not a feature
    assert np.asarray(g.to_graph().test_mask).tolist() == [False, False, False, True]


def test_node_csv_mask_columns():
    nodes = (b"id,label,train_mask,val_mask,test_mask\na,0,1,0,0\nb,1,false,TRUE,0\n"
             b"c,0,0,0,0\nd,1,,,1\n")
    g = load_graph_file("g.csv", b"source,target\na,b\nb,c\nc,d\n", node_csv=nodes)
    assert [m.tolist() for m in g.split] == [[True, False, False, False],
                                             [False, True, False, False],
                                             [False, False, False, True]]
    assert g.features is None
    only_test = load_graph_file("g.csv", b"source,target\na,b\n",
                                node_csv=b"id,label,test_mask\na,0,1\nb,1,0\n")
    assert [m.tolist() for m in only_test.split] == [[False, False], [False, False],
                                                     [True, False]]


def test_a_split_column_without_values_is_no_split():
    g = load_graph_file("g.csv", b"source,target\na,b\n",
                        node_csv=b"id,label,split\na,0,\nb,1,\n")
    assert g.split is None


@pytest.mark.parametrize("nodes, message", [
    (b"id,label,split\na,0,train\nb,1,training\n",
     "node CSV line 3: field 'split': 'training' is not train, val, test or empty"),
    (b"id,label,val_mask\na,0,yes\n",
     "node CSV line 2: field 'val_mask': 'yes' is not 0, 1, true or false"),
    (b"id,label,train_mask,test_mask\na,0,1,0\nb,1,1,1\n",
     "node CSV line 3: fields 'train_mask' and 'test_mask' are both set"),
    (b"id,label,split,train_mask\na,0,train,1\n", "node CSV line 1: use a 'split' column or"),
    (b"id,label,split,split\na,0,train,train\n",
     "node CSV line 1: column 'split' appears more than once"),
])
def test_bad_node_csv_split_names_line_and_field(nodes, message):
    with pytest.raises(GraphFileError, match=message):
        load_graph_file("g.csv", b"source,target\na,b\n", node_csv=nodes)


def test_json_split_attribute():
    data = {"nodes": [{"id": "a", "label": 0, "split": "train"},
                      {"id": "b", "label": 1, "split": "Val"},
                      {"id": "c", "label": 0, "split": None}, {"id": "d", "label": 1},
                      {"id": "e", "label": 1, "split": "test"}],
            "links": [{"source": "a", "target": "b"}]}
    g = load_graph_file("g.json", json.dumps(data).encode())
    assert [g.split_of(i) for i in range(5)] == ["train", "val", "", "", "test"]
    for bad in ("holdout", 1, True):
        data["nodes"][3]["split"] = bad
        with pytest.raises(GraphFileError,
                           match=f"g.json nodes\\[3\\]: field 'split': {bad!r} is not train"):
            load_graph_file("g.json", json.dumps(data).encode())


def test_json_split_kept_when_a_node_csv_adds_nodes():
    data = {"nodes": [{"id": "a", "split": "train"}, {"id": "b", "split": "test"}],
            "links": [{"source": "a", "target": "b"}]}
    g = load_graph_file("g.json", json.dumps(data).encode(),
                        node_csv=b"id,label\na,0\nb,1\nz,1\n")
    assert g.names == ("a", "b", "z")
    assert [g.split_of(i) for i in range(3)] == ["train", "test", ""]


def test_graph_file_checks_its_split():
    base = sample(split=None)
    with pytest.raises(GraphFileError, match="split: the val mask has shape \\[3\\] for 4"):
        GraphFile(names=base.names, edge_index=base.edge_index,
                  split=(np.zeros(4, bool), np.zeros(3, bool), np.zeros(4, bool)))
    with pytest.raises(GraphFileError, match="split: node 'alice' is in both train and test"):
        GraphFile(names=base.names, edge_index=base.edge_index,
                  split=(np.eye(4, dtype=bool)[0], np.zeros(4, bool), np.eye(4, dtype=bool)[0]))
    with pytest.raises(GraphFileError, match="split: expected three masks"):
        GraphFile(names=base.names, edge_index=base.edge_index, split=(np.zeros(4, bool),))


def test_to_graph_falls_back_to_a_per_class_split():
    graph = sample(split=None).to_graph(train_per_class=1)
    assert int(np.asarray(graph.train_mask).sum()) == 2  # one per class
    assert not np.asarray(graph.train_mask)[2]  # carol is unlabelled


# ------------------------------------------------------------------ sizes
def test_fifty_thousand_nodes_load_and_one_more_does_not():
    n = Limits().max_nodes
    assert n == 50_000  # the upload help promises up to 50,000 nodes
    ring = np.stack([np.arange(n), (np.arange(n) + 1) % n]).astype(np.int32)
    train = np.zeros(n, bool)
    train[:100] = True
    g = load_graph_file("big.npz", _npz(edge_index=ring, y=np.arange(n, dtype=np.int32) % 3,
                                        undirected=np.asarray(True), train_mask=train))
    assert g.num_nodes == n and g.edge_index.shape == (2, n) and int(g.split[0].sum()) == 100
    drawing = g.to_drawing()  # a data container: no layout for big graphs
    assert drawing.num_nodes == n and all(p is None for p in drawing.positions)
    with pytest.raises(GraphFileError, match="big.npz: 50001 nodes is over the limit of 50000"):
        load_graph_file("big.npz", _npz(edge_index=ring, y=np.zeros(n + 1, np.int32)))


def test_to_drawing_lays_out_small_graphs_only_unless_asked():
    n = 501
    path = GraphFile(names=tuple(map(str, range(n))),
                     edge_index=np.stack([np.arange(n - 1), np.arange(1, n)]))
    assert all(p is None for p in path.to_drawing().positions)
    assert all(p is not None for p in path.to_drawing(layout="circular").positions)
    assert all(p is None for p in sample().to_drawing(layout=None).positions)
    assert all(p is not None for p in sample().to_drawing().positions)

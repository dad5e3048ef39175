"""Graph files: round trips, every bad-input class named, fuzzing, limits."""

import json

import numpy as np
import pytest
from conftest import SHARED_DATASETS
from hypothesis import given, settings
from hypothesis import strategies as st

from explorer.graphio import GraphFile, GraphFileError, Limits, export_graph, load_graph_file


def sample(directed=False):
    return GraphFile(names=("alice", "bob", "carol", "dave"),
                     edge_index=np.asarray([[0, 1, 2, 3], [1, 2, 0, 0]]),
                     weights=np.asarray([1.5, 2.0, 0.25, 3.0], np.float32),
                     labels=np.asarray([0, 1, -1, 1], np.int32),
                     features=np.asarray([[1, 0], [0, 1], [1, 1], [0.5, 2]], np.float32),
                     directed=directed)


@pytest.mark.parametrize("fmt, ext", [("edgelist", ".edgelist"), ("csv", ".csv"),
                                      ("json", ".json"), ("npz", ".npz"),
                                      ("graphml", ".graphml"), ("gml", ".gml")])
def test_round_trip(fmt, ext):
    g = sample(directed=fmt in ("json", "graphml"))
    if fmt in ("graphml", "gml"):  # names, edges, weights, integer labels, direction
        g = GraphFile(names=g.names, edge_index=g.edge_index, weights=g.weights,
                      labels=g.labels, directed=g.directed)
    if fmt in ("edgelist", "csv"):  # these formats hold names, edges and weights only
        g = GraphFile(names=g.names, edge_index=g.edge_index, weights=g.weights)
    if fmt == "npz":  # ids are indices; weights are not part of the schema
        g = GraphFile(names=("0", "1", "2", "3"), edge_index=g.edge_index, labels=g.labels,
                      features=g.features)
    back = load_graph_file("g" + ext, export_graph(g, fmt))
    assert back.equals(g), fmt
    assert back.to_graph().num_nodes == 4


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

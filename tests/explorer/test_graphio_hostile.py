"""Graph files from a hostile or careless upload: the memory budget
(:class:`Limits`) is checked before anything of that size is allocated, and
every failure is a :class:`GraphFileError` that names the file."""

import io
import json
import random
import re
import struct
import tracemalloc
import zipfile
import zlib

import numpy as np
import pytest
from conftest import REPO

from explorer.graphio import (
    GraphFile,
    GraphFileError,
    Limits,
    _lines,
    export_graph,
    export_node_csv,
    load_graph_file,
)

MB = 1024 * 1024


def npz(compressed=False, **arrays) -> bytes:
    out = io.BytesIO()
    (np.savez_compressed if compressed else np.savez)(out, **arrays)
    return out.getvalue()


def npy_header(shape, dtype) -> bytes:
    """The ``.npy`` header alone, declaring ``shape`` and ``dtype``."""
    out = io.BytesIO()
    np.lib.format.write_array_header_1_0(out, {"descr": np.lib.format.dtype_to_descr(
        np.dtype(dtype)), "fortran_order": False, "shape": tuple(shape)})
    return out.getvalue()


def npy(array) -> bytes:
    out = io.BytesIO()
    np.save(out, array)
    return out.getvalue()


def member(name, payload, *, method=zipfile.ZIP_STORED, size=None, crc=None, body=None):
    """One zip entry: ``payload`` (the uncompressed bytes) stored or deflated;
    or a ready ``body`` with its ``crc`` and declared uncompressed ``size``."""
    if body is None:
        if method == zipfile.ZIP_DEFLATED:
            c = zlib.compressobj(6, zlib.DEFLATED, -15)
            body = c.compress(payload) + c.flush()
        else:
            body = payload
        crc = zlib.crc32(payload) if crc is None else crc
        size = len(payload) if size is None else size
    return name.encode(), body, method, crc, size


def zip_archive(*members) -> bytes:
    """A zip written by hand, so that a test can declare any size (zipfile
    writes only true ones) and use a deflate stream made without inflating it."""
    out, directory = bytearray(), bytearray()
    for name, body, method, crc, size in members:
        offset = len(out)
        out += struct.pack("<4s5H3L2H", b"PK\x03\x04", 20, 0, method, 0, 0x21, crc, len(body),
                           size, len(name), 0) + name + body
        directory += struct.pack("<4s6H3L5H2L", b"PK\x01\x02", 20, 20, 0, method, 0, 0x21, crc,
                                 len(body), size, len(name), 0, 0, 0, 0, 0, offset) + name
    end = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, len(members), len(members),
                      len(directory), len(out), 0)
    return bytes(out + directory + end)


def zeros_member(name, header: bytes, zeros: int):
    """A deflated member: ``header`` then ``zeros`` zero bytes (a multiple of
    1 MiB), built from one compressed MiB repeated: after a full flush deflate
    starts afresh, so each MiB compresses to the same bytes. A gigabyte costs
    about 1 MB and no gigabyte of memory."""
    mib = bytes(MB)
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    head = c.compress(header) + c.flush(zlib.Z_FULL_FLUSH)
    block = c.compress(mib) + c.flush(zlib.Z_FULL_FLUSH)
    body = head + block * (zeros // MB) + c.flush()
    crc = zlib.crc32(header)
    for _ in range(zeros // MB):
        crc = zlib.crc32(mib, crc)
    return member(name, None, method=zipfile.ZIP_DEFLATED, body=body, crc=crc,
                  size=len(header) + zeros)


def peak_while(fn) -> tuple[int, object]:
    """(peak traced bytes, result or raised error) of ``fn()``; numpy reports
    its array buffers to tracemalloc, so an array allocated shows up here."""
    tracemalloc.start()
    try:
        try:
            result = fn()
        except GraphFileError as err:
            result = err
        return tracemalloc.get_traced_memory()[1], result
    finally:
        tracemalloc.stop()


EDGES = np.asarray([[0, 1], [1, 2]], np.int32)


# ------------------------------------------------------------------ labels
def test_one_huge_label_in_a_tiny_json_is_refused():
    data = json.dumps({"nodes": [{"id": "a", "label": 1_000_000}, {"id": "b"}],
                       "links": [{"source": "a", "target": "b"}]}).encode()
    assert len(data) < 200  # a million-wide output layer from under 200 bytes
    with pytest.raises(GraphFileError, match=r"g\.json nodes\[0\] \(node 'a'\): label 1000000 "
                                             r"is above the largest class 63"):
        load_graph_file("g.json", data)


def test_the_largest_class_is_the_uis_and_labels_up_to_it_load():
    assert Limits().max_label == 63  # the UI's label box and shared links allow 0..63
    data = json.dumps({"nodes": [{"id": "a", "label": 63}, {"id": "b", "label": -1},
                                 {"id": "c", "label": 0}]}).encode()
    assert load_graph_file("g.json", data).labels.tolist() == [63, -1, 0]
    with pytest.raises(GraphFileError, match="label 5 is above the largest class 4"):
        load_graph_file("g.json", data.replace(b"63", b"5"), limits=Limits(max_label=4))


@pytest.mark.parametrize("name, data, node_csv, message", [
    ("g.json", b'{"nodes": [{"id": "a", "label": -2}]}', None,
     r"g\.json nodes\[0\] \(node 'a'\): label -2 is below -1"),
    ("g.csv", b"source,target\na,b\n", b"id,label\na,0\nb,64\n",
     r"node CSV line 3 \(node 'b'\): label 64 is above the largest class 63"),
    ("g.csv", b"source,target\na,b\n", b"id,label\na,1e30\n",
     r"node CSV line 2 \(node 'a'\): label 1000000000000000019884624838656 is above"),
    ("g.graphml", export_graph(GraphFile(names=("a", "b"), edge_index=EDGES[:, :1],
                                         labels=np.asarray([0, 1], np.int32)),
                               "graphml").replace(b">1<", b">100000<"), None,
     r"g\.graphml node 'b': label 100000 is above the largest class 63"),
    ("g.gml", b'graph [ node [ id 0 label "a" y 99999999999999999999 ] ]', None,
     r"g\.gml node 'a': label 99999999999999999999 is above the largest class 63"),
])
def test_labels_outside_the_classes_are_refused_in_every_format(name, data, node_csv, message):
    with pytest.raises(GraphFileError, match=message):
        load_graph_file(name, data, node_csv=node_csv)


@pytest.mark.parametrize("y, message", [
    (np.asarray([0, 2**32 + 1, 1], np.int64),  # an int32 cast would make it 1
     r"bad\.npz field y: node 1: label 4294967297 is above the largest class 63"),
    (np.asarray([0, 1, 2**64 - 1], np.uint64),
     r"field y: node 2: label 18446744073709551615 is above"),
    (np.asarray([0, -7, 1], np.int8), r"field y: node 1: label -7 is below -1"),
    (np.asarray([0.0, 1.5, 1.0]), r"field y: must be integers of shape \[3\] \(class labels"),
    (np.asarray([0.0, 1.0, 1.0]), r"field y: must be integers .* got float64 \[3\]"),
    (np.asarray([True, False, True]), r"field y: must be integers .* got bool \[3\]"),
])
def test_npz_labels_never_wrap_and_must_be_integers(y, message):
    with pytest.raises(GraphFileError, match=message):
        load_graph_file("bad.npz", npz(edge_index=EDGES, y=y))


# ------------------------------------------------------------------ features
@pytest.mark.parametrize("name", ["cora", "citeseer"])
def test_the_shipped_citation_graphs_are_within_every_limit(name):
    gf = load_graph_file(REPO / "assets" / f"{name}.npz")
    limits = Limits()
    assert gf.features.shape[1] <= limits.max_features
    assert gf.features.size <= limits.max_feature_values
    assert int(gf.labels.max()) <= limits.max_label


def test_a_small_npz_of_two_million_feature_columns_is_refused_before_decompressing():
    data = npz(compressed=True, edge_index=EDGES, x=np.zeros((3, 2_000_000), np.float32))
    assert len(data) < 64 * 1024  # 24 MB of float32 zeros compress to about 24 KB
    peak, err = peak_while(lambda: load_graph_file("wide.npz", data))
    assert isinstance(err, GraphFileError)
    assert str(err) == "wide.npz field x: 2,000,000 features is over the limit of 10,000"
    assert peak < 2 * MB, peak  # the 24 MB array was never built


def test_feature_values_in_all_are_capped():
    x = np.zeros((3, 40), np.float32)
    assert load_graph_file("g.npz", npz(edge_index=EDGES, x=x)).features.shape == (3, 40)
    with pytest.raises(GraphFileError, match=r"g\.npz field x: 3 x 40 feature values is over "
                                             r"the limit of 100"):
        load_graph_file("g.npz", npz(edge_index=EDGES, x=x), limits=Limits(max_feature_values=100))


@pytest.mark.parametrize("name, data, node_csv, message", [
    ("g.json", b'{"nodes": [{"id": "a", "x": [1, 2, 3, 4]}]}', None,
     r"g\.json nodes\[0\]: 4 features is over the limit of 3"),
    ("g.json", b'{"nodes": [{"id": "a", "x": [1, 2]}, {"id": "b", "x": [1, 2]}, '
               b'{"id": "c", "x": [1, 2]}]}', None,
     r"g\.json nodes\[2\]: more than 5 feature values in all"),
    ("g.csv", b"source,target\na,b\n", b"id,label,f1,f2,f3,f4\na,0,1,2,3,4\n",
     "node CSV line 1: 4 features is over the limit of 3"),
    ("g.csv", b"source,target\na,b\n", b"id,label,f1,f2\na,0,1,2\nb,0,1,2\nc,1,1,2\n",
     "node CSV line 4: more than 5 feature values in all"),
])
def test_feature_limits_in_the_text_formats(name, data, node_csv, message):
    limits = Limits(max_features=3, max_feature_values=5)
    with pytest.raises(GraphFileError, match=message):
        load_graph_file(name, data, node_csv=node_csv, limits=limits)


def test_no_features_and_too_many_nodes_for_one_hot_ids():
    n = 8000  # one-hot ids: 64 million float32, 256 MB
    ring = GraphFile(names=tuple(map(str, range(n))),
                     edge_index=np.stack([np.arange(n), (np.arange(n) + 1) % n]))
    with pytest.raises(GraphFileError, match="8,000 nodes and no features in the file: one-hot "
                                             "ids would be 64,000,000 values"):
        ring.to_graph()
    assert ring.to_graph(features="degree").x.shape == (n, 1)


def test_community_labels_stay_within_the_classes():
    pairs = 70  # 70 separate edges: 70 communities
    g = GraphFile(names=tuple(map(str, range(2 * pairs))),
                  edge_index=np.stack([np.arange(0, 2 * pairs, 2), np.arange(1, 2 * pairs, 2)]))
    y = np.asarray(g.to_graph(labels="community", features="degree").y)
    assert int(y.max()) == Limits().max_label and int((y == -1).sum()) == 2 * (pairs - 64)


# ------------------------------------------------------------------ .npz headers
@pytest.mark.parametrize("declared_size", ["true", "small"])
def test_a_zip_bomb_of_features_is_refused_from_its_header(declared_size):
    header = npy_header((1, 178_956_970), np.float64)  # 1.4 GB of features
    if declared_size == "true":  # an honest bomb: the zip says 1.4 GB, the data is 1.4 MB
        bomb = zeros_member("x.npy", header, 1365 * MB)
    else:  # the zip directory claims a few KB; the .npy header still says 1.4 GB
        bomb = member("x.npy", header + bytes(4096))
    data = zip_archive(member("edge_index.npy", npy(EDGES)), bomb)
    assert len(data) < 2 * MB
    peak, err = peak_while(lambda: load_graph_file("bomb.npz", data))
    assert isinstance(err, GraphFileError) and str(err).startswith("bomb.npz field x: ")
    assert "over the limit" in str(err)
    assert peak < 5 * MB, peak


def test_an_array_outside_the_schema_is_never_decompressed():
    junk = zeros_member("junk.npy", npy_header((1024 * MB,), np.uint8), 1024 * MB)
    data = zip_archive(member("edge_index.npy", npy(EDGES)),
                       member("y.npy", npy(np.asarray([0, 1, 0], np.int32))), junk)
    assert len(data) < 2 * MB  # 1 GB of zeros
    peak, g = peak_while(lambda: load_graph_file("junk.npz", data))
    assert isinstance(g, GraphFile), g
    assert g.num_nodes == 3 and g.labels.tolist() == [0, 1, 0]
    assert peak < 20 * MB, peak


def test_a_header_that_declares_more_than_the_file_holds_allocates_nothing():
    lie = member("x.npy", npy_header((40_000, 1000), np.float32) + bytes(64))  # 160 MB
    data = zip_archive(member("edge_index.npy", npy(EDGES)), lie)
    peak, err = peak_while(lambda: load_graph_file("lie.npz", data))
    assert isinstance(err, GraphFileError)
    assert "lie.npz field x: the header declares float32 [40000, 1000]" in str(err)
    assert peak < 5 * MB, peak


def test_the_zip_directorys_declared_size_is_checked():
    x = npy(np.ones((3, 2), np.float32))
    data = zip_archive(member("edge_index.npy", npy(EDGES)),
                       member("x.npy", x, size=2**31))  # the directory says 2 GB
    with pytest.raises(GraphFileError, match=r"big\.npz field x: 2,147,483,648 bytes "
                                             r"uncompressed is over the limit of 268,435,456"):
        load_graph_file("big.npz", data)
    small = Limits(max_array_bytes=16)  # and the header's shape x itemsize (24 bytes)
    with pytest.raises(GraphFileError, match=r"field x: float32 \[3, 2\] is 24 bytes, over the "
                                             r"limit of 16"):
        load_graph_file("big.npz", npz(edge_index=EDGES, x=np.ones((3, 2), np.float32)),
                        limits=small)


def test_only_stored_and_deflated_arrays_are_read():
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_BZIP2) as z:
        z.writestr("edge_index.npy", npy(EDGES))
    with pytest.raises(GraphFileError, match="field edge_index: encrypted or compressed with "
                                             "zip method 12; only stored and deflated"):
        load_graph_file("bz.npz", out.getvalue())
    deflated = npz(compressed=True, edge_index=EDGES, y=np.asarray([0, 1, 1], np.int32))
    assert load_graph_file("ok.npz", deflated).labels.tolist() == [0, 1, 1]


def test_too_many_archive_entries_are_refused_before_zipfile_reads_them():
    data = zip_archive(member("edge_index.npy", npy(EDGES)),
                       *(member(f"{k}.txt", b"") for k in range(100)))
    with pytest.raises(GraphFileError, match=r"many\.npz: 101 entries in the archive is over "
                                             r"the limit of 64"):
        load_graph_file("many.npz", data)
    assert load_graph_file("many.npz", data, limits=Limits(max_npz_members=101)).num_nodes == 3


class _Boom:
    ran = False

    def __reduce__(self):
        return (_Boom._run, ())

    @staticmethod
    def _run():
        _Boom.ran = True
        return 0


@pytest.mark.parametrize("key", ["y", "names"])
def test_pickles_are_never_loaded(key):
    data = npz(edge_index=EDGES, **{key: np.asarray([_Boom()], dtype=object)})
    with pytest.raises(GraphFileError, match=rf"p\.npz field {key}: holds pickled objects"):
        load_graph_file("p.npz", data)
    assert not _Boom.ran


@pytest.mark.parametrize("members, message", [
    ([member("edge_index.npy", npy(EDGES)[:-3])], r"field edge_index: the header declares"),
    ([member("edge_index.npy", npy(EDGES), crc=12345)], r"field edge_index: damaged data"),
    ([member("edge_index.npy", b"not an array at all")],
     r"field edge_index: not a readable \.npy array"),
    ([member("edge_index.npy", npy(EDGES)), member("undirected.npy", npy(np.ones(3, bool)))],
     r"field undirected: must be one bool, got bool \[3\]"),
    ([member("edge_index.npy", npy_header((2, -4), np.int64))],
     r"field edge_index: the header declares shape \[2, -4\]"),
])
def test_damaged_npz_members_name_the_field(members, message):
    with pytest.raises(GraphFileError, match=r"d\.npz " + message):
        load_graph_file("d.npz", zip_archive(*members))


# ------------------------------------------------------------------ text
def test_a_doctype_after_a_long_comment_is_refused():
    graph = export_graph(GraphFile(names=("a", "b"), edge_index=EDGES[:, :1]), "graphml")
    data = (b'<?xml version="1.0"?>\n<!--' + b"x" * 10_000 + b'-->\n'
            b'<!DOCTYPE graphml SYSTEM "graphml.dtd">\n' + graph)
    with pytest.raises(GraphFileError, match="DOCTYPE/ENTITY declarations are not allowed"):
        load_graph_file("late.graphml", data)
    assert load_graph_file("ok.graphml", data.replace(b"<!DOCTYPE graphml SYSTEM "
                                                      b'"graphml.dtd">', b"")).names == ("a", "b")


SMALL = GraphFile(names=("alice", "bob", "carol"), edge_index=EDGES,
                  labels=np.asarray([0, 1, -1], np.int32),
                  weights=np.asarray([1.0, 2.5], np.float32))


@pytest.mark.parametrize("encoding, bom", [("utf-8", b"\xef\xbb\xbf"), ("utf-16-le", b"\xff\xfe"),
                                           ("utf-16-be", b"\xfe\xff"),
                                           ("utf-32-le", b"\xff\xfe\x00\x00")])
@pytest.mark.parametrize("fmt", ["edgelist", "csv", "json", "graphml", "gml"])
def test_text_with_a_byte_order_mark(fmt, encoding, bom):
    text = export_graph(SMALL, fmt).decode()
    if fmt == "graphml":  # what a Windows editor saves
        text = f'<?xml version="1.0" encoding="{encoding.upper()}"?>\n' + text
    plain = load_graph_file("g." + fmt, export_graph(SMALL, fmt))
    g = load_graph_file("g." + fmt, bom + text.encode(encoding))
    assert g.names == ("alice", "bob", "carol")  # no "\ufeffalice", no broken CSV header
    assert g.equals(plain)


def test_a_node_csv_with_a_byte_order_mark():
    nodes = b"\xef\xbb\xbf" + export_node_csv(SMALL)
    g = load_graph_file("g.csv", export_graph(SMALL, "csv"), node_csv=nodes)
    assert g.labels.tolist() == [0, 1, -1]
    utf16 = "\ufeff".encode("utf-16-le") + export_node_csv(SMALL).decode().encode("utf-16-le")
    assert load_graph_file("g.csv", export_graph(SMALL, "csv"),
                           node_csv=utf16).labels.tolist() == [0, 1, -1]


@pytest.mark.parametrize("data, message", [
    (b"\xff\xfe" + "a b\n".encode("utf-16-le")[:-1], "not UTF-16 text (byte 8)"),
    (b"\xef\xbb\xbfa b\n\xff", "not UTF-8 text (byte 7)"),
    (b"\xff\xfe" + "\x00a b".encode("utf-16-le"), "binary data"),
    (b"\xfe\xff" + "   \n".encode("utf-16-be"), "the file is empty"),
])
def test_bad_text_after_a_byte_order_mark(data, message):
    with pytest.raises(GraphFileError, match=re.escape(f"g.edgelist: {message}")):
        load_graph_file("g.edgelist", data)


@pytest.mark.parametrize("name, data", [
    ("deep.json", b"[" * 1_000_000),
    ("deep.json", b'{"nodes": [{"id": ' + b"[" * 100_000 + b"]" * 100_000 + b"}]}"),
    ("deep.gml", b"graph [" + b" a [" * 100_000),
], ids=["json-brackets", "json-in-a-node", "gml"])
def test_deep_nesting_is_named(name, data):
    with pytest.raises(GraphFileError, match=rf"{name}: nested too deeply"):
        load_graph_file(name, data)


def test_deep_xml_is_refused_before_networkx_builds_it():
    data = b"<graphml>" + b"<a>" * 200_000 + b"</a>" * 200_000 + b"</graphml>"
    with pytest.raises(GraphFileError, match=r"deep\.graphml line 1: nested too deeply "
                                             r"\(more than 100 levels"):
        load_graph_file("deep.graphml", data)


@pytest.mark.parametrize("fmt, parse", [("graphml", "parse_graphml"), ("gml", "parse_gml")])
def test_graphml_and_gml_node_counts_are_checked_before_networkx_parses(fmt, parse,
                                                                        monkeypatch):
    import networkx as nx

    g = GraphFile(names=("a", "b", "c"), edge_index=EDGES)
    monkeypatch.setattr(nx, parse, lambda *a, **k: pytest.fail(f"{parse} was called"))
    with pytest.raises(GraphFileError, match="more than 2 nodes"):
        load_graph_file("g." + fmt, export_graph(g, fmt), limits=Limits(max_nodes=2))
    with pytest.raises(GraphFileError, match="more than 1 edges"):
        load_graph_file("g." + fmt, export_graph(g, fmt), limits=Limits(max_edges=1))


def test_a_node_csv_is_held_to_the_limits():
    edges = b"source,target\na,b\n"
    with pytest.raises(GraphFileError, match="node CSV line 3: more than 2 nodes"):
        load_graph_file("g.csv", edges, node_csv=b"id,label\na,0\nz,1\n",
                        limits=Limits(max_nodes=2))
    with pytest.raises(GraphFileError, match="node CSV: 29 bytes is over the limit of 20"):
        load_graph_file("g.csv", edges, node_csv=b"id,label\na,0\nb,1\nc,0\nd,1\ne,1\n",
                        limits=Limits(max_bytes=20))


@pytest.mark.parametrize("name, data, node_csv, message", [
    ("g.csv", b"source,target\na," + b"b" * 200_000 + b"\n", None,
     r"g\.csv line 2: field larger than field limit"),
    ("g.csv", b"source,target\na,b\n", b"id,label\na," + b"1" * 200_000 + b"\n",
     r"node CSV line 2: field larger than field limit"),
    ("g.json", b'{"nodes": [{"id": "a", "label": ' + b"9" * 5000 + b"}]}",
     None, r"g\.json: invalid JSON: Exceeds the limit \(4300 digits\)"),
], ids=["csv-field", "node-csv-field", "json-int"])
def test_oversized_fields_are_named_not_could_not_be_read(name, data, node_csv, message):
    with pytest.raises(GraphFileError, match=message):
        load_graph_file(name, data, node_csv=node_csv)


def test_lines_are_splitlines_one_block_at_a_time():
    rng = random.Random(0)
    alphabet = "ab \n\r\x0b\x0c\x1c\x85\u2028#"
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(30)))
        for block in (1, 2, 3, 7, 1 << 20):
            assert list(_lines(text, block)) == text.splitlines(), (text, block)


# ------------------------------------------------------------------ fuzz
def _valid_files():
    g = GraphFile(names=("alice", "bob", "carol", "dave"),
                  edge_index=np.asarray([[0, 1, 2, 3], [1, 2, 0, 0]]),
                  weights=np.asarray([1.5, 2.0, 0.25, 3.0], np.float32),
                  labels=np.asarray([0, 1, -1, 1], np.int32),
                  features=np.asarray([[1, 0], [0, 1], [1, 1], [0.5, 2]], np.float32),
                  split=(np.asarray([1, 0, 0, 0], bool), np.asarray([0, 1, 0, 0], bool),
                         np.asarray([0, 0, 0, 1], bool)))
    files = {"." + fmt: export_graph(g, fmt) for fmt in ("edgelist", "csv", "json", "npz",
                                                         "graphml", "gml")}
    files[".npz.deflated"] = npz(compressed=True, edge_index=g.edge_index, x=g.features,
                                 y=g.labels, train_mask=g.split[0])
    return files


TOKENS = [b"[", b"]", b"{", b"}", b"<", b"/>", b'"', b",", b"\n", b"\r", b" ", b"-1", b"-2",
          b"64", b"99999999999999999999", b"1e999", b"NaN", b"\x00", b"\xff\xfe", b"\xef\xbb\xbf",
          b"<!--", b"node [", b" y ", b"label", b"PK\x01\x02", b"PK\x05\x06", b"\x93NUMPY",
          b"'shape': (", b"'descr': '|O'", b"999999999999", b"<node id='q'/>"]


@pytest.mark.filterwarnings("ignore:No key type:UserWarning")  # networkx on mangled keys
def test_fuzz_hostile_bytes_give_only_named_graph_file_errors():
    """Seeded and quick: random bytes, byte flips, inserted tokens and cuts of
    valid files of every format. Every failure is a GraphFileError naming the
    file, and none goes through the catch-all for reader bugs."""
    rng = random.Random(1234)
    files = _valid_files()
    outcomes = {"loaded": 0, "refused": 0}
    for _ in range(4000):
        ext = rng.choice(sorted(files))
        raw = bytearray(files[ext])
        ext = ext.replace(".deflated", "")
        mode = rng.randrange(4)
        if mode == 0:
            raw = bytearray(rng.randbytes(rng.randint(1, 300)))
        elif mode == 1:
            for _ in range(rng.randint(1, 8)):
                raw[rng.randrange(len(raw))] = rng.randrange(256)
        elif mode == 2:
            for _ in range(rng.randint(1, 4)):
                at = rng.randrange(len(raw) + 1)
                raw[at:at] = rng.choice(TOKENS)
        else:
            at = rng.randrange(len(raw))
            del raw[at:at + rng.randint(1, 40)]
        try:
            load_graph_file("fuzz" + ext, bytes(raw), limits=Limits(max_npz_members=8))
            outcomes["loaded"] += 1
        except GraphFileError as err:
            message = str(err)
            assert message.startswith("fuzz" + ext), message
            assert "could not be read (" not in message, (message, bytes(raw))
            outcomes["refused"] += 1
    assert outcomes["loaded"] > 50 and outcomes["refused"] > 500, outcomes

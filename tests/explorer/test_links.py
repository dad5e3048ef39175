"""Shareable links: settings and a drawn graph survive the URL round trip, bad
links fall back with a notice, and a graph too big for a link is left out. What
the app does with links (AppTest) is in ``tests/app/test_app_links.py``."""

import base64
import json
import zlib

import numpy as np
import pytest
from graphs import drawing

from explorer.config import LayerConfig, RunConfig
from explorer.drawing import from_preset
from explorer.links import (
    MAX_GRAPH_CHARS,
    MAX_LINK_CHARS,
    MAX_LINK_NODES,
    decode,
    encode,
    graph_blob,
)

CONFIGS = [
    RunConfig(),
    RunConfig(mode="jax.jit", seed=3, dropout=0.2, batch_norm=True, norm="graph",
              layers=(LayerConfig("gat", 8, {"heads": 4}), LayerConfig("sage", 16,
                                                                    {"aggr": "max"}))),
    RunConfig(graph="sbm", difficulty=0.35, features="laplacian", learning_rate=0.003,
              optimizer="sgd", bucket_padding=True, epochs=7, train_per_class=2),
    RunConfig(graph="triangle", features="degree", pool="sum", head=True,
              layers=(LayerConfig("gin", 32),)),
    RunConfig(mode="scan", scan_steps=25),
]


def _blob(obj) -> str:
    raw = json.dumps(obj).encode()
    return base64.urlsafe_b64encode(zlib.compress(raw)).decode().rstrip("=")


@pytest.mark.parametrize("config", CONFIGS)
def test_settings_round_trip(config):
    params = encode(config)
    assert all(isinstance(v, str) for v in params.values())
    link = decode(params)
    assert link.config == config and link.notices == () and link.drawing is None
    assert encode(RunConfig()) == {}  # defaults are not written


def test_scan_steps_are_written_only_when_they_differ_from_the_default():
    assert encode(RunConfig(mode="scan")) == {"mode": "scan"}
    assert encode(RunConfig(mode="scan", scan_steps=3)) == {"mode": "scan", "scan_steps": "3"}
    assert decode({"mode": "scan", "scan_steps": "3"}).config.scan_steps == 3


def test_a_drawn_graph_round_trips_compactly():
    d = from_preset("les_miserables").add_edge(0, 50).set_label([3], 7).remove_nodes([5])
    params = encode(RunConfig(), d, classroom=True)
    assert len(params["g"]) < 2500 and params["classroom"] == "1"
    link = decode(params)
    assert link.classroom and link.notices == ()
    assert (link.drawing.names, link.drawing.labels, link.drawing.edges) == \
        (d.names, d.labels, d.edges)
    assert all(p is not None for p in link.drawing.positions)


@pytest.mark.parametrize("params, message", [
    ({"mode": "jax.jitt"}, "link parameter mode ignored"),
    ({"seed": "-1"}, "link parameter seed: -1 is below the limit (an integer from 0 to"),
    ({"seed": "1e30"}, "link parameter seed='1e30' ignored"),
    ({"learning_rate": "inf"}, "learning_rate='inf' ignored: must be a finite number"),
    ({"learning_rate": "nan"}, "learning_rate='nan' ignored: must be a finite number"),
    ({"layers": ",".join(["gcn-16"] * 200)}, "layers ignored: 200 layers, at most 8"),
    ({"g": base64.urlsafe_b64encode(zlib.compress(b"[" * 100_000 + b"]" * 100_000))
      .decode()}, "nested too deeply"),
    ({"dropout": "lots"}, "dropout='lots' ignored"),
    ({"batch_norm": "maybe"}, "batch_norm='maybe' ignored"),
    ({"layers": "gcn-16,gat-x"}, "link parameter layers ignored"),
    ({"layers": "conv-16"}, "link parameter layers ignored"),
    ({"wat": "1"}, "unknown link parameter 'wat'"),
    ({"g": "!!!notbase64"}, "link graph ignored"),
    ({"g": _blob([1, 2])}, "must be a JSON object"),
    ({"g": _blob({"n": 3, "e": [[0, 7]]})}, "pairs of node indices"),
    ({"g": _blob({"n": 10**6})}, "1 to 2000 nodes"),
    ({"g": _blob({"n": 2, "y": [0, 99]})}, "names or labels"),
    ({"g": base64.urlsafe_b64encode(zlib.compress(b"[" * 400_000)).decode()},
     "too large"),
    ({"graph": "triangle", "g": _blob({"n": 2})}, "cannot go with a graph-classification"),
    ({"x": "y" * (MAX_LINK_CHARS + 1)}, "longer than"),
])
def test_tampered_links_fall_back_with_a_notice(params, message):
    link = decode(params)  # never raises
    assert any(message in n for n in link.notices), link.notices
    RunConfig.from_dict(link.config.to_dict())  # always a valid config


@pytest.mark.parametrize("params, field, kept, notice", [
    ({"seed": "4294967296"}, "seed", 2**32 - 1,
     "link parameter seed: 4294967296 is above the limit (an integer from 0 to 4294967295), "
     "4294967295 used"),
    ({"learning_rate": "1e30"}, "learning_rate", 1e12, "1e+30 is above the limit"),
    ({"dropout": "0.99"}, "dropout", 0.9, "dropout: 0.99 is above the limit (a number from 0 "
     "to 0.9), 0.9 used"),
    ({"epochs": "0"}, "epochs", 1, "epochs: 0 is below the limit"),
    ({"train_per_class": "10000000"}, "train_per_class", 1000, "train_per_class: 10000000"),
    ({"weight_decay": "-1"}, "weight_decay", 0.0, "weight_decay: -1 is below the limit"),
    ({"scan_steps": "5000"}, "scan_steps", 1000,
     "scan_steps: 5000 is above the limit (an integer from 1 to 1000), 1000 used"),
])
def test_out_of_range_numbers_are_clamped_with_a_notice_naming_the_limit(params, field, kept,
                                                                          notice):
    link = decode(params)
    assert getattr(link.config, field) == kept
    assert len(link.notices) == 1 and notice in link.notices[0], link.notices


def test_layer_widths_and_heads_are_clamped_before_anything_is_built():
    link = decode({"layers": "gat-8-h1000000,gcn-99999"})
    assert link.config.layers == (LayerConfig("gat", 8, {"heads": 8}),
                                  LayerConfig("gcn", 1024))
    assert any("heads of 'gat-8-h1000000': 1000000 is above the limit (an integer from 1 to "
               "8), 8 used" in n for n in link.notices), link.notices
    assert any("width of 'gcn-99999': 99999 is above" in n for n in link.notices)


def test_a_link_that_breaks_the_decoder_gives_the_defaults(monkeypatch):
    import explorer.links as links_module

    def broken(params):
        raise RuntimeError("a bug")

    monkeypatch.setattr(links_module, "_decode", broken)
    link = decode({"seed": "1"})
    assert link.config == RunConfig()
    assert link.notices == ("the link could not be read (RuntimeError): default settings used",)


def test_valid_parts_of_a_partly_bad_link_are_kept():
    link = decode({"mode": "functional", "seed": "oops", "graph": "triangle"})
    assert link.config.mode == "functional" and link.config.graph == "triangle"
    assert link.config.features == "degree_one_hot"  # a dataset's default features
    assert link.config.seed == 0 and len(link.notices) == 1


def test_a_graph_too_big_for_a_link_is_left_out_and_the_settings_stay(monkeypatch):
    import explorer.links as links_module
    big = drawing(MAX_LINK_NODES + 1, [(0, 1)])
    encoded = []
    monkeypatch.setattr(links_module, "_graph_blob",
                        lambda d, real=links_module._graph_blob: encoded.append(d) or real(d))
    assert graph_blob(big) is None and encoded == []  # refused before encoding anything
    params = encode(RunConfig(seed=3), big)
    assert params == {"seed": "3"}
    rng = np.random.default_rng(0)  # random edges do not compress: too many characters
    pairs = {tuple(sorted(map(int, rng.choice(1500, 2, replace=False)))) for _ in range(6000)}
    dense = drawing(1500, pairs)
    assert graph_blob(dense) is None and len(encoded) == 1
    small = drawing(10, [(0, 1), (1, 2)])
    assert len(graph_blob(small)) <= MAX_GRAPH_CHARS and "g" in encode(RunConfig(), small)

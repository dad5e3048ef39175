"""Shareable links: settings and a drawn graph survive the URL round trip, a
new session reproduces the same run, and bad links fall back with a notice."""

import base64
import json
import re
import zlib

import numpy as np
import pytest
from conftest import REPO
from streamlit.testing.v1 import AppTest

from explorer.config import LayerConfig, RunConfig
from explorer.drawing import from_preset
from explorer.engine import Run
from explorer.links import (
    MAX_GRAPH_CHARS,
    MAX_LINK_CHARS,
    MAX_LINK_NODES,
    decode,
    encode,
    graph_blob,
)
from explorer.sources import GraphSource

CONFIGS = [
    RunConfig(),
    RunConfig(mode="jax.jit", seed=3, dropout=0.2, batch_norm=True, norm="graph",
              layers=(LayerConfig("gat", 8, {"heads": 4}), LayerConfig("sage", 16,
                                                                    {"aggr": "max"}))),
    RunConfig(graph="sbm", difficulty=0.35, features="laplacian", learning_rate=0.003,
              optimizer="sgd", bucket_padding=True, epochs=7, train_per_class=2),
    RunConfig(graph="triangle", features="degree", pool="sum", head=True,
              layers=(LayerConfig("gin", 32),)),
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


def _app(params=None):
    at = AppTest.from_file(str(REPO / "streamlit_app.py"), default_timeout=120)
    for k, v in (params or {}).items():
        at.query_params[k] = v
    return at.run()


def test_a_link_reproduces_the_run_in_a_new_session():
    first = _app()
    first.selectbox(key="g_preset").set_value("ring_of_cliques").run()
    first.radio(key="t_mode").set_value("functional").run()
    ws = first.session_state["workspace"]
    ws.connect([0, 9])  # a drawn edit travels in the link
    first.run()
    for _ in range(3):
        first.button(key="t_step").click().run()
    params = {k: v[0] if isinstance(v, list) else v for k, v in first.query_params.items()}
    assert params["mode"] == "functional" and "g" in params

    second = _app(params)
    assert not second.exception, second.exception
    ws2 = second.session_state["workspace"]
    assert ws2.config == ws.config and ws2.drawing.edges == ws.drawing.edges
    for _ in range(3):
        second.button(key="t_step").click().run()
    np.testing.assert_array_equal([r.loss for r in ws2.run.history],
                                  [r.loss for r in ws.run.history])
    # and the engine alone agrees
    engine = Run(ws.config, ws.graph)
    np.testing.assert_array_equal([engine.step().loss for _ in range(3)],
                                  [r.loss for r in ws.run.history])


def test_classroom_links_hide_advanced_controls_and_bad_links_show_a_notice():
    at = _app({"classroom": "1", "mode": "jax.jit", "seed": "nope"})
    assert not at.exception, at.exception
    assert not [h for h in at.header if h.value == "Model"]  # the model panel is hidden
    assert not at.file_uploader  # so is the upload
    assert any("seed" in w.value for w in at.warning)
    at.button(key="t_step").click().run()
    at.button(key="t_step").click().run()
    assert "FROZEN" in " ".join(e.value for e in at.error)


@pytest.mark.parametrize("params, notice", [
    ({"g": base64.urlsafe_b64encode(zlib.compress(b"[" * 100_000 + b"]" * 100_000)).decode()},
     "nested too deeply"),
    ({"seed": "4294967296"}, "4294967295 used"),
    ({"seed": "1e30"}, "seed='1e30' ignored"),
    ({"layers": ",".join(["gcn-16"] * 200)}, "200 layers, at most 8"),
    ({"layers": "gat-8-h1000000"}, "8 used"),
])
def test_a_hostile_link_opens_the_app_with_a_notice(params, notice):
    at = _app(params)
    assert not at.exception, at.exception
    shown = " ".join(w.value for w in at.warning)
    assert notice.replace("'", "") in re.sub(r"\\(.)", r"\1", shown).replace("'", ""), shown
    ws = at.session_state["workspace"]
    assert ws.run is not None and len(ws.config.layers) <= 8
    at.button(key="t_step").click().run()
    assert not at.exception and ws.steps_done == 1


def test_a_link_parameter_named_like_markdown_is_shown_as_text():
    name = "![](http://127.0.0.1:9/beacon)"
    at = _app({name: "1", "lesson": "[Sign in again](http://127.0.0.1:9/)"})
    assert not at.exception, at.exception
    shown = [w.value for w in at.warning]
    assert all("http\u2060" in w for w in shown)  # a word joiner keeps URLs from linking
    shown = [w.replace("\u2060", "") for w in shown]
    # every markdown character of the user's text is escaped: no image, no link
    assert any(r"\!\[\]\(http\://127\.0\.0\.1\:9/beacon\)" in w for w in shown), shown
    assert any(r"\[Sign in again\]\(http\://127\.0\.0\.1\:9/\)" in w for w in shown), shown
    assert not any("](" in w for w in shown)


def _drawing(n, edges):
    from explorer.drawing import Drawing
    return Drawing(names=tuple(str(i) for i in range(n)), labels=(0,) * n,
                   positions=(None,) * n, edges=tuple(sorted(edges)))


def test_a_graph_too_big_for_a_link_is_left_out_and_the_settings_stay(monkeypatch):
    import explorer.links as links_module
    big = _drawing(MAX_LINK_NODES + 1, [(0, 1)])
    encoded = []
    monkeypatch.setattr(links_module, "_graph_blob",
                        lambda d, real=links_module._graph_blob: encoded.append(d) or real(d))
    assert graph_blob(big) is None and encoded == []  # refused before encoding anything
    params = encode(RunConfig(seed=3), big)
    assert params == {"seed": "3"}
    rng = np.random.default_rng(0)  # random edges do not compress: too many characters
    pairs = {tuple(sorted(map(int, rng.choice(1500, 2, replace=False)))) for _ in range(6000)}
    dense = _drawing(1500, pairs)
    assert graph_blob(dense) is None and len(encoded) == 1
    small = _drawing(10, [(0, 1), (1, 2)])
    assert len(graph_blob(small)) <= MAX_GRAPH_CHARS and "g" in encode(RunConfig(), small)


def test_the_app_encodes_an_edited_graph_once_and_says_when_it_does_not_fit(monkeypatch):
    import explorer.links as links_module
    calls = []
    real = links_module.graph_blob
    monkeypatch.setattr(links_module, "graph_blob", lambda d: calls.append(d) or real(d))
    at = _app()
    ws = at.session_state["workspace"]
    ws.connect([0, 9])
    at.run()
    at.run()
    at.button(key="t_step").click().run()
    assert len(calls) == 1 and "g" in at.query_params  # one drawing, one encoding
    ws.load_drawing(_drawing(MAX_LINK_NODES + 5, [(0, 1), (1, 2)]),
                    GraphSource("drawing", "big.edgelist"))
    at.run()
    assert not at.exception, at.exception
    assert "g" not in at.query_params
    assert any("not its graph" in c.value for c in at.caption)


@pytest.mark.parametrize("params, field, value", [
    ({"learning_rate": "1000000"}, "learning_rate", 1e6),
    ({"learning_rate": "0.00002"}, "learning_rate", 2e-5),
    ({"seed": str(2**32 - 1)}, "seed", 2**32 - 1),
    ({"layers": "gat-1024-h8,gcn-16"}, "layers", (LayerConfig("gat", 1024, {"heads": 8}),
                                                  LayerConfig("gcn", 16))),
])
def test_values_within_the_limits_reach_the_widgets_unchanged(params, field, value):
    at = _app(params)
    assert not at.exception, at.exception
    ws = at.session_state["workspace"]
    assert getattr(ws.config, field) == value
    assert not [i.value for i in at.info if "Changed" in i.value]  # the widgets kept it
    at.run()
    assert getattr(ws.config, field) == value and ws.run is not None

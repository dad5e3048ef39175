"""Shareable links in the app (AppTest): a new session reproduces the same run,
hostile or odd links open the app with a notice, values within the limits reach
the widgets unchanged, and an edited graph is encoded once. The codec itself is
tested in ``tests/explorer/test_links.py``."""

import base64
import re
import zlib

import numpy as np
import pytest
from conftest import REPO
from graphs import drawing
from streamlit.testing.v1 import AppTest

from explorer.config import LayerConfig
from explorer.engine import Run
from explorer.links import MAX_LINK_NODES
from explorer.sources import GraphSource


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
    ws.load_drawing(drawing(MAX_LINK_NODES + 5, [(0, 1), (1, 2)]),
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

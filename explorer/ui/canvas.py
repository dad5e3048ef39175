"""The graph canvas as a Streamlit Components v2 component: Cytoscape.js
(shipped in ``assets/cytoscape``) plus ``graph_canvas.js``. What it shows and
what its events do live in :mod:`explorer.canvas` (no streamlit)."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from explorer.sources import ASSETS

HERE = Path(__file__).resolve().parent
CYTOSCAPE = ASSETS / "cytoscape" / "cytoscape.min.js"
HEIGHT = 520

HTML = """
<div class="gc-root">
  <div class="gc-box" tabindex="0" role="application"
       aria-label="Graph canvas: double-click to add a node"></div>
  <div class="gc-bar">
    <div class="gc-info"></div>
    <div class="gc-tools">
      <button class="gc-in" title="Zoom in">+</button>
      <button class="gc-out" title="Zoom out">&minus;</button>
      <button class="gc-fit" title="Fit the graph in view (F)">Fit</button>
    </div>
  </div>
</div>
"""

CSS = """
.gc-root { position: relative; font-family: var(--st-font, sans-serif); }
.gc-box { height: 460px; border: 1px solid var(--st-border-color, #d0d0d0);
          border-radius: 8px; background: #fff; outline: none; }
.gc-box:focus { border-color: var(--st-primary-color, #d6336c); }
.gc-bar { display: flex; align-items: flex-start; gap: 8px; padding-top: 4px; }
.gc-tools { display: flex; gap: 4px; flex: none; }
.gc-tools button { min-width: 30px; height: 28px; border-radius: 6px; cursor: pointer;
                   border: 1px solid var(--st-border-color, #ccc); background: #fff;
                   color: #333; font-size: 14px; }
.gc-tools button:hover { border-color: var(--st-primary-color, #d6336c); }
.gc-info { flex: 1; font-size: 12.5px; color: #555; min-height: 18px; padding: 2px; }
"""


@st.cache_resource
def _component():
    """Registered once per server (it holds code, no session data)."""
    return st.components.v2.component(
        "gnn_explorer.graph_canvas", html=HTML, css=CSS, isolate_styles=False,
        js=(HERE / "graph_canvas.js").read_text(encoding="utf-8"))


@st.cache_resource
def _cytoscape():
    """Cytoscape.js (443 kB) in a component of its own that only loads it
    (it sets ``globalThis.cytoscape``). Its message never changes, so after the
    first time Streamlit sends a reference to the browser's cached copy; inside
    the canvas, whose data changes on every redraw, it was sent in full each
    time, which cost a busy 2-core machine up to a third of a second a click.
    ``cytoscape_frames.js`` comes first: Cytoscape's frames run only while the
    canvas has something to draw."""
    js = ((HERE / "cytoscape_frames.js").read_text(encoding="utf-8")
          + CYTOSCAPE.read_text(encoding="utf-8")
          + "\nexport default function () { return () => {}; }\n")
    return st.components.v2.component("gnn_explorer.cytoscape", js=js)


def graph_canvas(data: dict, *, key: str, on_events) -> dict | None:
    """Mount the canvas with ``data`` (see :func:`explorer.canvas.payload`);
    ``on_events`` runs when it sends events. Returns the events message of
    this rerun, if any."""
    with st.container(gap=None):  # the loader takes no room
        _cytoscape()(key=f"{key}_cytoscape")
        # wrapped in a list: Streamlit checks each value of a dict it is given
        # for a dataframe, and that check imports pandas and pyarrow (about
        # 0.4 s of a new server's first page, which shows no table)
        result = _component()(data=[data], key=key, on_events_change=on_events,
                              height=HEIGHT)
    return getattr(result, "events", None)

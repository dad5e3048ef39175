"""The Streamlit page: graph, model, train and diagnose panels around one
per-session :class:`explorer.workspace.Workspace`.

The UI holds no training logic: every button calls a workspace method, and
every chart is built by ``explorer.plots`` from the workspace's data.
"""

from __future__ import annotations

import streamlit as st

from explorer import linechart, links
from explorer.ui import (
    diagnose_panel,
    graph_panel,
    lesson_panel,
    model_panel,
    runs_panel,
    train_panel,
)
from explorer.ui.common import (
    build_if_drawn,
    build_pending,
    classroom,
    guard,
    plain,
    presenting,
    sync_link,
    workspace,
)

TITLE = "GNN JIT Explorer"
PANEL_MIN_PX = 400  # narrower than this, the graph and train panels stack


#: presenter view: type a class can read from the back of the room
PRESENT_CSS = ("<style>html { font-size: 20px; } [data-testid='stMain'] .block-container "
               "{ max-width: 100%; padding-left: 2rem; padding-right: 2rem; }</style>")


def main() -> None:
    st.set_page_config(page_title=TITLE, page_icon=":material/hub:", layout="wide",
                       initial_sidebar_state="collapsed" if presenting() else "auto")
    if presenting():
        st.html(PRESENT_CSS)
    pages = [st.Page(explorer_page, title="Explorer", icon=":material/hub:", default=True),
             st.Page(runs_panel.render, title="Your runs", icon=":material/monitoring:",
                     url_path="runs")]
    st.navigation(pages, position="top").run()


def explorer_page() -> None:
    """The explorer: a graph, a model, a JIT mode, live training and diagnosis."""
    ws = workspace()
    build_if_drawn(ws)  # the server's first session: the page was drawn without its model
    with st.sidebar:
        if classroom():
            st.caption("Classroom link: the model settings are fixed by the link.")
        else:
            guard("model", model_panel.render, ws)
    st.title(TITLE)
    st.caption(
        "Draw or load a graph, stack GNN layers, pick a JIT mode and train live. Switch the "
        "mode to `jax.jit` to see frozen training: a step that mutates Flax NNX modules "
        "inside plain `jax.jit` loses every update, with no error.")
    # Everything above the panels sits in containers that are always there, so a
    # notice that comes or goes never shifts the panels' places on the page (a shift
    # would remount the graph canvas and lose its zoom).
    with st.container():
        for notice in st.session_state.pop("link_notices", ()):  # shown once
            st.warning(f"Link: {plain(notice)}", icon=":material/link_off:")
    with st.container():
        guard("lesson", lesson_panel.render, ws)
    with st.container():
        if ws.notice and ws.notice_is_edit:
            # an edit's notice is a toast: a box here would push the canvas down
            # under the mouse of someone drawing on it
            st.toast(plain(ws.notice), icon=":material/edit:", duration=6)
            ws.notice, ws.notice_is_edit = "", False
        elif ws.notice:
            st.info(plain(ws.notice), icon=":material/info:")
    # The line charts' hover band under the pointer shows as a faint column, so
    # it is clear which step the tooltip names (explorer/linechart.py).
    st.html(f"<style>.{linechart.CSS_CLASS}-hover:hover {{ fill-opacity: 0.08; }}</style>")
    # Side by side when there is room; on a narrow window (or beside an open
    # sidebar at 1000 px) the two panels wrap and each gets the full width.
    st.html(f"<style>.st-key-panels > div > [data-testid='stHorizontalBlock'] "
            f"{{ flex-wrap: wrap; }} .st-key-panels > div > [data-testid='stHorizontalBlock'] "
            f"> [data-testid='stColumn'] {{ min-width: {PANEL_MIN_PX}px; }}</style>")
    with st.container(key="panels"):
        graph_col, train_col = st.columns([1.15, 1], gap="large")
        with graph_col:
            guard("graph", graph_panel.render, ws)
        with train_col:
            guard("train", train_panel.render, ws)
    st.divider()
    guard("diagnose", diagnose_panel.render, ws)
    if sync_link(ws):
        st.caption("The address bar holds this run's settings and graph: copy it to share "
                   "the run.")
    else:
        st.caption(f"The address bar holds this run's settings, not its graph: a link holds "
                   f"a graph of up to {links.MAX_LINK_NODES:,} nodes and "
                   f"{links.MAX_GRAPH_CHARS:,} characters. *Download as script* (Train) "
                   "carries the graph.")
    build_pending(ws)  # the server's first session: the model once this page is drawn
    if ws.run is not None:
        # the page is drawn: compile the eval function (metrics, predictions) in the
        # background, so Play pays only for the training step's own compile
        ws.run.warm_up()

"""Graph panel: presets, uploads, the drawing (plotly, click or lasso to
select), editing tools, colouring and the edge table."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from explorer import plots
from explorer.graphio import FORMATS, GraphFileError
from explorer.sources import GRAPH_TASKS, PRESETS
from explorer.ui.common import attempt, classroom, set_error, show_error
from explorer.workspace import Workspace

COLOUR_BY = ("label", "prediction", "embedding")
MAX_TABLE_EDGES = 5000  # larger graphs are edited with the tools, not the table
LIVE_EVERY_S = 1.0  # graph redraw interval while training, when coloured by the model

_S = st.session_state


# ------------------------------------------------------------------ source
SOURCES = list(PRESETS) + list(GRAPH_TASKS)


def _describe(name: str) -> str:
    if name in GRAPH_TASKS:
        return (f"Graph classification: 120 small graphs, one label each — "
                f"{GRAPH_TASKS[name][0]}. Pooled readout + linear head.")
    return PRESETS[name].description


def _load_preset(ws: Workspace) -> None:
    name = _S.g_preset
    synthetic = name in PRESETS and PRESETS[name].synthetic
    difficulty = float(_S.get("g_difficulty", 0.0)) if synthetic else 0.0
    if attempt("graph", lambda: ws.load_preset(name, difficulty=difficulty)):
        set_error("upload", "")


def _source(ws: Workspace) -> None:
    if "g_preset" not in _S:
        _S.g_preset = ws.config.graph
        _S.g_difficulty = ws.config.difficulty
    cols = st.columns([3, 1], vertical_alignment="bottom")
    cols[0].selectbox("Preset graph or dataset", SOURCES, key="g_preset",
                      on_change=_load_preset, args=(ws,),
                      format_func=lambda n: ("dataset: " if n in GRAPH_TASKS else "")
                      + n.replace("_", " "))
    cols[1].button("Reload", key="g_reload", on_click=_load_preset, args=(ws,),
                   help="Load the preset again (drops your edits)")
    st.caption(_describe(_S.g_preset))
    if _S.g_preset in PRESETS and PRESETS[_S.g_preset].synthetic:
        st.slider("Difficulty", 0.0, 1.0, step=0.05, key="g_difficulty",
                  on_change=_load_preset, args=(ws,),
                  help="0 = classes are easy to separate from the structure; 1 = hard.")
    if classroom():
        return
    uploaded = st.file_uploader(
        "…or upload a graph", type=sorted(ext.lstrip(".") for ext in FORMATS), key="g_upload",
        help="Edge list (.edgelist/.txt), CSV (source,target[,weight]), node-link JSON, "
             ".npz (edge_index, x, y), GraphML or GML. Up to 20 MB / 50,000 nodes.")
    if uploaded is not None and _S.get("g_upload_done") != uploaded.file_id:
        _S.g_upload_done = uploaded.file_id
        try:
            warnings = ws.load_file(uploaded.name, uploaded.getvalue())
        except (GraphFileError, ValueError) as err:
            set_error("upload", f"Upload rejected: {err}. The current graph is kept.")
        else:
            set_error("upload", "")
            _S.g_upload_warnings = warnings
            st.rerun()  # the model panel (drawn first) must see the new graph
    show_error("upload")
    if ws.source.startswith("file") and _S.get("g_upload_warnings"):
        st.warning("; ".join(_S.g_upload_warnings))
    if ws.file_features:
        st.checkbox("Use the file's node features", key="g_file_features",
                    value=ws.use_file_features, on_change=_toggle_file_features, args=(ws,))


def _toggle_file_features(ws: Workspace) -> None:
    ws.use_file_features = bool(_S.g_file_features)
    ws.reset()


# ----------------------------------------------------------------- drawing
def _selected(ws: Workspace) -> list[int]:
    """Nodes selected in the chart (click, box, lasso) or picked by name."""
    nodes = set(_S.get(f"g_pick_{ws.revision}", []))
    state = _S.get(f"g_plot_{ws.revision}")
    points = (state or {}).get("selection", {}).get("points", []) if state else []
    for point in points:
        if point.get("curve_number") != plots.NODE_TRACE:
            continue
        data = point.get("customdata")
        if isinstance(data, list):
            data = data[0] if data else None
        if data is not None and 0 <= int(data) < ws.drawing.num_nodes:
            nodes.add(int(data))
    return sorted(nodes)


def _colours(ws: Workspace, by: str, layer: int) -> tuple[list[str], list[int] | None]:
    d, run = ws.drawing, ws.run
    if ws.task == "graph" and run is not None:
        if by == "prediction":
            pred = [int(run.predictions()[ws.sample])] * d.num_nodes
            return plots.label_colours(pred), pred
        if by == "embedding":
            layers = run.embeddings()
            hidden = layers[min(layer, len(layers) - 1)]
            ptr = run.batch_data.ptr
            rows = hidden[int(ptr[ws.sample]):int(ptr[ws.sample + 1])]
            return plots.embedding_colours(rows), None
        return plots.label_colours(d.labels), None
    if by == "prediction" and run is not None:
        pred = [int(p) for p in run.predictions()]
        return plots.label_colours(pred), pred
    if by == "embedding" and run is not None:
        hidden = run.embeddings()
        return plots.embedding_colours(hidden[min(layer, len(hidden) - 1)]), None
    return plots.label_colours(d.labels), None


def _drawing(ws: Workspace) -> None:
    d = ws.drawing
    cols = st.columns([3, 2])
    by = cols[0].radio("Colour nodes by", COLOUR_BY, horizontal=True, key="g_colour")
    layer = 0
    if by == "embedding" and ws.run is not None:
        depth = len(ws.config.layers)
        layer = cols[1].selectbox("Layer", range(depth), key="g_layer",
                                  format_func=lambda i: f"after layer {i + 1}")
    colours, pred = _colours(ws, by, layer)
    splits = ws.splits()
    hover = [f"node {name} · label {label}" + (f" · predicted {pred[i]}" if pred else "")
             + f" · {splits[i] if splits else 'none'}"
             for i, (name, label) in enumerate(zip(d.names, d.labels))]
    selected = _selected(ws)
    fig = plots.graph_figure(d, colours=colours, splits=splits or None, selected=selected,
                             hover=hover, height=460)
    st.plotly_chart(fig, key=f"g_plot_{ws.revision}", on_select="rerun",
                    selection_mode=("points", "box", "lasso"),
                    config={"displaylogo": False})
    if ws.task == "node":
        st.caption("Click a node to select it (shift-click or lasso for more). Symbols: "
                   "■ train · ◆ val · ● test · ○ in no split.")
        _tools(ws, selected)
    else:
        st.caption("A dataset graph is shown, not edited; its marker is its split "
                   "(■ train · ◆ val · ● test).")


def _tools(ws: Workspace, selected: list[int]) -> None:
    d = ws.drawing
    st.multiselect("Selected nodes", range(d.num_nodes), key=f"g_pick_{ws.revision}",
                   format_func=lambda i: d.names[i], placeholder="click nodes or pick here")
    row = st.columns(5)
    actions = {
        "add": row[0].button("Add node", key="g_add",
                             help="A new node, unlabelled, placed near the others"),
        "connect": row[1].button("Connect", key="g_connect",
                                 help="Join the two selected nodes"),
        "disconnect": row[2].button("Disconnect", key="g_disconnect",
                                    help="Remove the edge between the two selected nodes"),
        "delete": row[3].button("Delete", key="g_delete",
                                help="Delete the selected nodes and their edges"),
        "undo": row[4].button("Undo", key="g_undo", disabled=len(ws.history) < 2),
    }
    row = st.columns([1, 1, 1, 1], vertical_alignment="bottom")
    label = row[0].number_input("Label", min_value=-1, max_value=63, value=0, key="g_label",
                                help="-1 = unlabelled")
    actions["label"] = row[1].button("Set label", key="g_set_label",
                                     help="Give the selected nodes this label")
    layout = row[2].selectbox("Layout", ("spring", "kamada_kawai", "spectral", "circular"),
                              key="g_layout")
    actions["layout"] = row[3].button("Re-layout", key="g_relayout")
    todo = {
        "add": lambda: ws.add_node(),
        "connect": lambda: ws.connect(selected),
        "disconnect": lambda: ws.disconnect(selected),
        "delete": lambda: ws.delete(selected),
        "undo": ws.undo,
        "label": lambda: ws.set_label(selected, int(label)),
        "layout": lambda: ws.relayout(layout),
    }
    for name, pressed in actions.items():
        if pressed:
            attempt("graph", todo[name])
            st.rerun()  # everything downstream (model width, run, charts) follows
    show_error("graph")


def _edge_table(ws: Workspace) -> None:
    d = ws.drawing
    if len(d.edges) > MAX_TABLE_EDGES:
        st.caption(f"{len(d.edges)} edges: too many to edit as a table.")
        return
    current = [(d.names[u], d.names[v]) for u, v in d.edges]
    table = pd.DataFrame(current, columns=["source", "target"], dtype=object)
    names = list(d.names)
    edited = st.data_editor(
        table, key=f"g_edges_{ws.revision}", num_rows="dynamic", hide_index=True,
        column_config={
            "source": st.column_config.SelectboxColumn("source", options=names, required=True),
            "target": st.column_config.SelectboxColumn("target", options=names, required=True),
        })
    rows = [(u, v) for u, v in zip(edited["source"], edited["target"])
            if isinstance(u, str) and u and isinstance(v, str) and v]
    if rows != current:
        if attempt("graph", ws.set_edges, rows):
            st.rerun()
    st.caption("Add a row (choose both ends), edit or delete rows: the drawing and the run "
               "follow. Rows missing an end are ignored.")


def _dataset(ws: Workspace, table: list[dict]) -> None:
    run = ws.run
    cols = st.columns(4)
    cols[0].metric("Graphs", len(table))
    cols[1].metric("Classes", len({r["label"] for r in table}))
    cols[2].metric("Nodes / graph", f"{np.mean([r['nodes'] for r in table]):.1f}")
    acc = run.accuracies()["test"] if run is not None else float("nan")
    cols[3].metric("Test accuracy", f"{acc:.0%}")
    key = f"g_sample_{ws.revision}"
    st.number_input("Graph on show", min_value=0, max_value=max(len(table) - 1, 0),
                    key=key, value=ws.sample, on_change=_show_sample, args=(ws, key))
    row = table[ws.sample] if table else None
    if row:
        st.caption(f"Graph {row['graph']} ({row['split']}): {row['nodes']} nodes, "
                   f"{row['edges']} edges, label {row['label']}, predicted "
                   f"{row['predicted']} {'✓' if row['correct'] else '✗'}")


def _show_sample(ws: Workspace, key: str) -> None:
    ws.show_sample(int(_S[key]))


def _predictions(rows: list[dict]) -> None:
    table = pd.DataFrame(rows)
    if table.empty:
        return
    for split in ("train", "val", "test"):
        part = table[table["split"] == split]
        if len(part):
            st.caption(f"{split}: {part['correct'].mean():.0%} of {len(part)} graphs correct")
    st.dataframe(table, hide_index=True, height=260)


def render(ws: Workspace) -> None:
    st.header("Graph")
    _source(ws)
    if ws.task == "graph":
        table = ws.graph_table()  # one eval forward per redraw, shared below
        _dataset(ws, table)
    else:
        s = ws.stats()
        cols = st.columns(4)
        cols[0].metric("Nodes", s.nodes)
        cols[1].metric("Edges", s.edges, help="directed" if s.directed else "undirected")
        cols[2].metric("Classes", s.classes)
        cols[3].metric("Density", f"{s.density:.3f}")
    colour = _S.get("g_colour", "label")
    live = ws.playing and colour != "label"
    st.fragment(run_every=LIVE_EVERY_S if live else None)(_drawing)(ws)
    if ws.task == "graph":
        with st.expander("Per-graph predictions", expanded=True):
            _predictions(table)
    else:
        with st.expander(f"Edge table ({len(ws.drawing.edges)} edges)"):
            _edge_table(ws)
    st.caption(f"Source: {ws.source}")

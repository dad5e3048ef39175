"""Graph panel: presets and uploads, the canvas (Cytoscape.js: draw with the
mouse), editing tools, colouring, the split in use and the edge table."""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np
import streamlit as st

from explorer import canvas, plots
from explorer.drawing import LAYOUTS
from explorer.engine import task_for
from explorer.graphio import FORMATS, MAX_LABEL, GraphFileError
from explorer.sources import GRAPH_TASKS, PRESETS
from explorer.ui.canvas import graph_canvas
from explorer.ui.common import (
    answer_due,
    attempt,
    classroom,
    data_frame,
    plain,
    set_error,
    show_error,
)
from explorer.workspace import Workspace

COLOUR_BY = ("label", "prediction", "embedding")
MAX_TABLE_EDGES = 5000  # larger graphs are edited with the tools, not the table
LIVE_EVERY_S = 1.0  # graph redraw interval while training, when coloured by the model

_S = st.session_state


# ------------------------------------------------------------------ source
SOURCES = list(PRESETS) + list(GRAPH_TASKS)


def _describe(name: str) -> str:
    if not task_for(name).editable:  # a dataset of graphs
        return (f"Graph classification: 120 small graphs, one label each — "
                f"{GRAPH_TASKS[name][0]}. Pooled readout + linear head.")
    return PRESETS[name].description


def _load_preset(ws: Workspace) -> None:
    name = _S.g_preset
    if name not in SOURCES:  # the entry naming the uploaded file: nothing to load
        return
    synthetic = name in PRESETS and PRESETS[name].synthetic
    difficulty = float(_S.get("g_difficulty", 0.0)) if synthetic else 0.0
    if attempt("graph", lambda: ws.load_preset(name, difficulty=difficulty)):
        set_error("upload", "")


def _source(ws: Workspace) -> None:
    # an uploaded or drawn graph gets its own entry, so the box never names a
    # preset that is no longer on show
    current = ws.config.graph if ws.source.shipped else str(ws.source)
    options = SOURCES if current in SOURCES else [current, *SOURCES]
    if _S.get("g_preset") != current or "g_preset" not in _S:
        _S.g_preset = current
        _S.g_difficulty = ws.config.difficulty
    cols = st.columns([3, 1], vertical_alignment="bottom")
    cols[0].selectbox("Preset graph or dataset", options, key="g_preset",
                      on_change=_load_preset, args=(ws,),
                      format_func=lambda n: n if n not in SOURCES else
                      ("" if task_for(n).editable else "dataset: ") + n.replace("_", " "))
    cols[1].button("Reload", key="g_reload", on_click=_load_preset, args=(ws,),
                   disabled=current not in SOURCES, width="stretch",
                   help="Load the preset again (drops your edits)")
    if current in SOURCES:
        st.caption(_describe(current))
    if current in PRESETS and PRESETS[current].synthetic:
        st.slider("Difficulty", 0.0, 1.0, step=0.05, key="g_difficulty",
                  on_change=_load_preset, args=(ws,),
                  help="0 = classes are easy to separate from the structure; 1 = hard.")
    if classroom():
        return
    uploaded = st.file_uploader(
        "…or upload a graph", type=sorted(ext.lstrip(".") for ext in FORMATS), key="g_upload",
        help="Edge list (.edgelist/.txt), CSV (source,target[,weight]), node-link JSON, "
             ".npz (edge_index, x, y, train/val/test masks), GraphML or GML. Up to 20 MB / "
             "50,000 nodes; a file's own split and features are kept.")
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
    if ws.source.kind == "file" and _S.get("g_upload_warnings"):
        st.warning(plain("; ".join(_S.g_upload_warnings)))
    if ws.has_file_features:
        st.checkbox("Use the graph's own node features", key="g_file_features",
                    value=ws.config.features == "file", on_change=_toggle_file_features,
                    args=(ws,), help="features = 'file'; unticked: one-hot node ids")


def _toggle_file_features(ws: Workspace) -> None:
    attempt("graph", ws.use_file_features, bool(_S.g_file_features))


# ------------------------------------------------------------------ canvas
def _colours(ws: Workspace, by: str, layer: int,
             nodes: Sequence[int]) -> tuple[list[str], list[int] | None]:
    """Colours (and predictions, when coloured by them) of ``nodes``."""
    d, run = ws.drawing, ws.run
    nodes = np.asarray(nodes, int)
    if run is not None and not run.task.editable:  # a dataset: one of its graphs on show
        if by == "prediction":
            pred = [int(np.asarray(run.predictions())[ws.sample])] * len(nodes)
            return plots.label_colours(pred), pred
        if by == "embedding":
            layers = run.embeddings()
            hidden = layers[min(layer, len(layers) - 1)]
            rows = np.asarray(hidden[run.task.nodes_of(ws.sample)])
            return plots.embedding_colours(rows)[:len(nodes)], None
        return plots.label_colours(np.asarray(d.labels)[nodes]), None
    if by == "prediction" and run is not None:
        pred = np.asarray(run.predictions())[nodes].tolist()  # one host copy, not N
        return plots.label_colours(pred), pred
    if by == "embedding" and run is not None:
        hidden = run.embeddings()
        colours = plots.embedding_colours(hidden[min(layer, len(hidden) - 1)])  # PCA of all
        return [colours[i] for i in nodes], None
    return plots.label_colours(np.asarray(d.labels, int)[nodes]), None


def _canvas_events(ws: Workspace) -> None:
    """The canvas sent events (a callback: runs before the panel redraws)."""
    message = (_S.get("g_canvas") or {}).get("events")
    edits, problems = canvas.apply_events(ws, message)
    set_error("graph", "; ".join(problems))
    if edits:
        set_error("upload", "")
        _S.g_canvas_edited = True  # the rest of the page must follow the edit
    # this run goes on to the canvas's fragment; live training skips its tick in it
    # (a whole tick before the answer made clicks wait), see train_panel._live
    answer_due(True)


def _colour_controls(ws: Workspace) -> None:
    # outside the canvas's fragment: a change reruns the page, which also starts
    # (or stops) the fragment's live refresh while training
    cols = st.columns([3, 2])  # always two columns: the canvas keeps its place
    by = cols[0].radio("Colour nodes by", COLOUR_BY, horizontal=True, key="g_colour")
    if by == "embedding" and ws.run is not None:
        depth = len(ws.config.layers)
        cols[1].selectbox("Layer", range(depth), key="g_layer",
                          format_func=lambda i: f"after layer {i + 1}")


def _drawing(ws: Workspace) -> None:
    answer_due(False)  # answered now
    d = ws.drawing
    by = _S.get("g_colour", "label")
    layer = int(_S.get("g_layer", 0)) if by == "embedding" else 0
    view = canvas.choose_view(d, ws.selected)
    colours, pred = _colours(ws, by, layer, view.nodes)
    splits = ws.splits()
    tips = []
    for k, i in enumerate(view.nodes):
        split = splits[i] if splits else "none"
        tips.append(f"node {d.names[i]} · label {d.labels[i]}"
                    + (f" · predicted {pred[k]}" if pred else "")
                    + f" · {split if split != 'none' else 'in no split'}")
    with st.container():  # always there: the canvas keeps its place (see render)
        if view.partial:
            st.info(view.caption().capitalize() + ". Training uses the whole graph; edits "
                    "act on the nodes shown.", icon=":material/visibility:")
    fit = hash((ws.loads, _S.get("g_fit", 0), view.nodes if view.partial else ()))
    data = canvas.payload(ws, view, colours=colours, splits=splits, tips=tips, fit=fit)
    graph_canvas(data, key="g_canvas", on_events=functools.partial(_canvas_events, ws))
    st.caption("Shapes: ■ train · ◆ val · ● test · ○ (hollow) in no split. Colour: "
               + {"label": "the node's label (grey: unlabelled)",
                  "prediction": "the model's prediction, live while training",
                  "embedding": "the layer's embedding (its first principal components)"}[by]
               + ".")
    if ws.task.editable:
        _selection(ws, view.nodes)
    else:
        st.caption("A dataset graph is shown, not edited.")
    show_error("graph")
    if _S.pop("g_canvas_edited", False):
        # an edit from the canvas: the model width, the run and the charts outside this
        # fragment follow. Rerun only after the canvas was drawn: a rerun before it
        # would unmount it (losing its zoom and its queue of unsent events).
        st.rerun()


def _pick(ws: Workspace, key: str) -> None:
    if key == _pick_key():  # not a box the page no longer shows (see _selection)
        ws.select(_S[key])


def _pick_key() -> str:
    # a few keys in turn: Streamlit keeps a record of every widget key it has seen
    return f"g_pick_{_S.get('g_pick_generation', 0) % 16}"


def _selection(ws: Workspace, view_nodes) -> None:
    """The "Selected nodes" box: in the canvas's fragment, so a click on the
    canvas shows here in the same answer.

    When the canvas (or an edit) changes the selection, the box is drawn anew
    under a new key, with the selection as its default:
    - a rerun the page sends before it has that answer (a label typed right
      after a click, a resent canvas event) still carries the old box's value;
      under the old key that is not a pick (:func:`_pick`), where it would
      select the old nodes again;
    - a default is in every answer, where a value set through the session
      state is in the first only, and a page that takes in several answers at
      once (a busy browser) can skip that one and show an empty box."""
    d = ws.drawing
    selected = list(ws.selected)
    shown = _S.get(_pick_key(), _S.get("g_pick_drawn"))
    if shown is None or sorted(set(shown)) != selected:  # (a pick in the box keeps it)
        _S.g_pick_generation = _S.get("g_pick_generation", 0) + 1
        _S.pop(_pick_key(), None)  # a key used before (they come round again)
        _S.g_pick_drawn = selected
    key = _pick_key()
    options = sorted(set(view_nodes) | set(selected))
    with st.container(key="g_pick"):  # one name for the box, whatever its key
        st.multiselect("Selected nodes", options, default=_S.g_pick_drawn, key=key,
                       on_change=_pick, args=(ws, key), format_func=lambda i: d.names[i],
                       placeholder="click nodes on the canvas (shift-click for more) or pick "
                                   "here")


def _tools(ws: Workspace) -> None:
    """The editing buttons, outside the canvas's fragment: a canvas answer
    does not redraw them (a dozen widgets the browser re-rendered on every
    click), and a press reruns the whole page anyway. They act on the
    selection as it is when pressed (the canvas's callback keeps it current)."""
    selected = list(ws.selected)
    stretch = {"width": "stretch"}
    row = st.columns(4)
    actions = {
        "add": row[0].button("Add node", key="g_add",
                             help="A new unlabelled node at a free spot (or double-click the "
                                  "canvas where you want it)", **stretch),
        "connect": row[1].button("Connect", key="g_connect",
                                 help="Join the two selected nodes", **stretch),
        "disconnect": row[2].button("Unlink", key="g_disconnect",

                                    help="Remove the edge between the two selected nodes",
                                    **stretch),
        "delete": row[3].button("Delete", key="g_delete",
                                help="Delete the selected nodes and their edges (or press "
                                     "Delete on the canvas)", **stretch),
    }
    row = st.columns(4)
    actions["undo"] = row[0].button("Undo", key="g_undo",
                                    disabled=not ws.history.can_undo, help="Ctrl+Z", **stretch)
    actions["redo"] = row[1].button("Redo", key="g_redo",
                                    disabled=not ws.history.can_redo, help="Ctrl+Shift+Z",
                                    **stretch)
    actions["clear"] = row[2].button("New graph", key="g_clear",
                                     help="A new empty graph to draw on (Undo brings this one "
                                          "back)", **stretch)
    fit = row[3].button("Fit", key="g_fit_button",
                        help="Fit the whole graph in view (F on the canvas)", **stretch)
    row = st.columns([1, 1, 1, 1], vertical_alignment="bottom")
    label = row[0].number_input("Label", min_value=-1, max_value=MAX_LABEL, value=0,
                                key="g_label",
                                help="-1 = unlabelled. On the canvas: select, then type the "
                                     "number")
    actions["label"] = row[1].button("Set label", key="g_set_label", **stretch,
                                     help="Give the selected nodes this label")
    layout = row[2].selectbox("Layout", LAYOUTS, key="g_layout")
    actions["layout"] = row[3].button("Re-layout", key="g_relayout", **stretch,
                                      help="Lay every node out afresh (one undo step)")
    todo = {
        "add": lambda: ws.select([ws.add_node()]),
        "connect": lambda: ws.connect(selected),
        "disconnect": lambda: ws.disconnect(selected),
        "delete": lambda: ws.delete(selected),
        "undo": ws.undo,
        "redo": ws.redo,
        "clear": ws.clear,
        "label": lambda: ws.set_label(selected, int(label)),
        "layout": lambda: ws.relayout(layout),
    }
    if fit:
        _S.g_fit = _S.get("g_fit", 0) + 1
        st.rerun()  # the canvas, drawn above, fits with the new token
    for name, pressed in actions.items():
        if pressed:
            if attempt("graph", todo[name]):
                set_error("upload", "")
            if name in ("layout", "clear"):
                _S.g_fit = _S.get("g_fit", 0) + 1
            st.rerun()  # everything downstream (model width, run, charts) follows


def _edge_table(ws: Workspace) -> None:
    d = ws.drawing
    if len(d.edges) > MAX_TABLE_EDGES:
        st.caption(f"{len(d.edges)} edges: too many to edit as a table.")
        return
    current = [(d.names[u], d.names[v]) for u, v in d.edges]
    table = data_frame(current, columns=["source", "target"], dtype=object)
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
    table = data_frame(rows)
    if table.empty:
        return
    for split in ("train", "val", "test"):
        part = table[table["split"] == split]
        if len(part):
            st.caption(f"{split}: {part['correct'].mean():.0%} of {len(part)} graphs correct")
    st.dataframe(table, hide_index=True, height=260)


def render(ws: Workspace) -> None:
    st.header("Graph")
    # containers that are always there: what comes and goes inside them never
    # shifts the canvas's place on the page (which would remount it)
    with st.container():
        _source(ws)
    table: list[dict] = []
    with st.container():
        _summary(ws, table)
    with st.container():
        _colour_controls(ws)
    colour = _S.get("g_colour", "label")
    live = ws.playing and colour != "label"
    st.fragment(_drawing, run_every=LIVE_EVERY_S if live else None)(ws)
    if ws.task.editable:
        with st.container():
            _tools(ws)
        # drawn only while open: the table's code (about 1.2 MB of JavaScript)
        # then loads when someone opens it, not with every first page
        with st.expander(f"Edge table ({len(ws.drawing.edges):,} edges)", key="g_edge_table",
                         on_change="rerun") as edges_box:
            if edges_box.open:
                _edge_table(ws)
    else:
        with st.expander("Per-graph predictions", expanded=True):
            _predictions(table)
    st.caption(f"Source: {plain(str(ws.source))}")


def _summary(ws: Workspace, table: list[dict]) -> None:
    if not ws.task.editable:  # a dataset of graphs
        table.extend(ws.graph_table())  # one eval forward per redraw, shared below
        _dataset(ws, table)
    else:
        s = ws.stats()
        cols = st.columns(4)
        cols[0].metric("Nodes", f"{s.nodes:,}")
        cols[1].metric("Edges", f"{s.edges:,}",
                       help="Directed edges." if s.directed else
                       "Undirected edges. Training sees each as two directed ones "
                       f"({2 * s.edges:,}), and retrace notices count those.")
        cols[2].metric("Classes", s.classes)
        cols[3].metric("Density", f"{s.density:.3f}")
        edges = ("directed edges" if s.directed else
                 f"undirected edges ({2 * s.edges:,} directed in training)")
        info, features = ws.split_info(), ws.features_info()
        st.caption(f"Edges are {edges}." + (f" Split: {info}." if info else "")
                   + (f" Features: {features}." if features else ""))

"""Plotly figures for the GNN JIT Explorer.

Every function here takes plain data (a :class:`~explorer.drawing.Drawing`,
lists, numpy arrays) and returns a ``plotly.graph_objects.Figure``. Nothing
here knows about Streamlit, so the figures can be built and tested anywhere.

Conventions the UI relies on:

* In :func:`graph_figure`, trace 0 holds the edges and trace :data:`NODE_TRACE`
  the nodes; each node point carries its index as ``customdata``. Any further
  traces are legend-only and come after the node trace.
* Figures use a fixed ``uirevision`` so zoom and pan survive redraws.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
import plotly.graph_objects as go

from explorer.linechart import EMPTY_RUN, step_tick_spacing, value_ticks

if TYPE_CHECKING:
    from explorer.drawing import Drawing

__all__ = [
    "NODE_TRACE", "PALETTE", "SPLIT_SYMBOLS", "UNLABELLED",
    "embedding_colours", "graph_figure", "heatmap_figure", "label_colours",
    "loss_figure", "race_figure", "timing_figure",
]

NODE_TRACE = 1  # index of the node trace in graph_figure (trace 0 = edges)

# Class colours (d3 "category" hues, grey left out: grey means unlabelled).
PALETTE = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
    "#e377c2", "#17becf", "#bcbd22", "#393b79", "#637939", "#7b4173",
)
UNLABELLED = "#b0b0b0"

# Marker symbol per split: filled shapes for the labelled splits, an open
# circle for nodes that are in no split.
SPLIT_SYMBOLS = {
    "train": "square",
    "val": "diamond",
    "test": "circle",
    "none": "circle-open",
}

EDGE_COLOUR = "#9a9a9a"
SELECTED_OUTLINE = "#111"
MAX_ARROWS = 300  # directed graphs with more edges get no arrow heads
MAX_NODE_TEXT = 60  # more nodes than this: no name next to each marker


# ------------------------------------------------------------------ colours
def label_colours(labels: Sequence[int]) -> list[str]:
    """One hex colour per node: ``PALETTE`` by class (cycling when there are
    more classes than colours), ``UNLABELLED`` for a negative label."""
    return [UNLABELLED if int(lab) < 0 else PALETTE[int(lab) % len(PALETTE)]
            for lab in labels]


def _hex(rgb: Sequence[float]) -> str:
    """``#rrggbb`` from three values in [0, 1]."""
    return "#" + "".join(f"{round(float(v) * 255):02x}" for v in rgb)


def embedding_colours(h) -> list[str]:
    """One hex colour per node from a layer's embeddings ``h`` ([N, D]).

    The embeddings are projected on their first three principal components
    (centred, SVD), each component is min-max scaled to [0, 1] and the three
    become red, green and blue. Nodes with similar embeddings get similar
    colours. The result does not change when ``h`` is scaled or a column of
    ``h`` changes sign: each component's sign is fixed so that the node with
    the largest absolute score has a positive one.

    A component that is constant (or missing, when D < 3 or N <= 3) is drawn at
    0.5, so a constant ``h`` or a single node gives mid-grey. Non-finite entries
    count as 0.
    """
    h = np.asarray(h, dtype=np.float64)
    if h.ndim == 1:
        h = h[:, None]
    n = h.shape[0]
    if n == 0:
        return []
    h = np.nan_to_num(h, nan=0.0, posinf=0.0, neginf=0.0)
    channels = np.full((n, 3), 0.5)
    centred = h - h.mean(axis=0)
    if n > 1 and h.shape[1] > 0:
        _, s, vt = np.linalg.svd(centred, full_matrices=False)
        tol = 1e-9 * s[0] if s.size else 0.0
        for k in range(min(3, s.size)):
            if s[k] <= tol:  # also catches s[0] == 0, a constant h
                break
            score = centred @ vt[k]
            size = np.abs(score)
            first_largest = np.flatnonzero(size >= size.max() * (1 - 1e-9))[0]
            if score[first_largest] < 0:
                score = -score
            low, high = score.min(), score.max()
            if high - low > 1e-12 * max(abs(low), abs(high)):
                channels[:, k] = (score - low) / (high - low)
    return [_hex(rgb) for rgb in channels]


# -------------------------------------------------------------------- graph
def _node_xy(drawing: Drawing) -> np.ndarray:
    """[N, 2] node positions; a node without a position sits at (0, 0)."""
    xy = np.zeros((drawing.num_nodes, 2))
    for i, p in enumerate(drawing.positions):
        if p is not None:
            xy[i] = p
    return xy


def _edge_trace(drawing: Drawing, xy: np.ndarray) -> go.Scatter:
    """All edges as one line trace, segments separated by ``None``."""
    x: list[float | None] = []
    y: list[float | None] = []
    for u, v in drawing.edges:
        x += [xy[u, 0], xy[v, 0], None]
        y += [xy[u, 1], xy[v, 1], None]
    return go.Scatter(x=x, y=y, mode="lines", name="edges",
                      line={"color": EDGE_COLOUR, "width": 1.2},
                      hoverinfo="skip", showlegend=False)


def _arrows(drawing: Drawing, xy: np.ndarray, marker_size: float) -> list[dict]:
    """One arrow annotation per directed edge, from source to target. The
    head stops ``standoff`` pixels short of the target, at its marker edge.
    Self-loops get no arrow."""
    standoff = marker_size / 2 + 2
    return [
        {"x": xy[v, 0], "y": xy[v, 1], "ax": xy[u, 0], "ay": xy[u, 1],
         "xref": "x", "yref": "y", "axref": "x", "ayref": "y", "text": "",
         "showarrow": True, "arrowhead": 2, "arrowsize": 1.2, "arrowwidth": 1.2,
         "arrowcolor": EDGE_COLOUR, "standoff": standoff,
         "startstandoff": standoff}
        for u, v in drawing.edges if u != v
    ]


def _split_names(splits: Sequence[str] | None, n: int) -> list[str]:
    """Validated split name per node (``None`` means every node is "none")."""
    if splits is None:
        return ["none"] * n
    splits = [str(s) for s in splits]
    if len(splits) != n:
        raise ValueError(f"got {len(splits)} splits for {n} nodes")
    unknown = sorted(set(splits) - set(SPLIT_SYMBOLS))
    if unknown:
        raise ValueError(f"unknown splits {unknown}; use {sorted(SPLIT_SYMBOLS)}")
    return splits


def graph_figure(drawing: Drawing, *, colours: Sequence[str],
                 splits: Sequence[str] | None = None, selected: Sequence[int] = (),
                 hover: Sequence[str] | None = None, height: int = 480) -> go.Figure:
    """The graph as a clickable figure.

    Trace 0 draws the edges (plus arrow annotations for a directed graph with
    at most ``MAX_ARROWS`` edges); trace :data:`NODE_TRACE` draws the nodes,
    coloured by ``colours``, shaped by ``splits`` (see :data:`SPLIT_SYMBOLS`),
    with ``customdata`` = node index. Nodes in ``selected`` get a thick dark
    outline. Legend-only traces explaining the split symbols follow.
    """
    n = drawing.num_nodes
    if len(colours) != n:
        raise ValueError(f"got {len(colours)} colours for {n} nodes")
    if hover is not None and len(hover) != n:
        raise ValueError(f"got {len(hover)} hover texts for {n} nodes")
    split_names = _split_names(splits, n)
    chosen = {int(i) for i in selected}
    xy = _node_xy(drawing)
    show_text = n <= MAX_NODE_TEXT
    marker_size = 16 if show_text else 10
    if hover is None:
        hover = [f"node {name}, label {label}"
                 for name, label in zip(drawing.names, drawing.labels)]

    nodes = go.Scatter(
        x=xy[:, 0], y=xy[:, 1], name="nodes", showlegend=False,
        mode="markers+text" if show_text else "markers",
        text=list(drawing.names) if show_text else None,
        textposition="top center",
        customdata=list(range(n)),
        hovertext=list(hover), hovertemplate="%{hovertext}<extra></extra>",
        marker={
            "size": marker_size, "color": list(colours),
            "symbol": [SPLIT_SYMBOLS[s] for s in split_names],
            "line": {"width": [3 if i in chosen else 1 for i in range(n)],
                     "color": [SELECTED_OUTLINE if i in chosen else "white"
                               for i in range(n)]},
        },
    )
    fig = go.Figure([_edge_trace(drawing, xy), nodes])
    for split, symbol in SPLIT_SYMBOLS.items():
        if split in split_names:
            fig.add_trace(go.Scatter(
                x=[None], y=[None], mode="markers", name=f"{split} nodes",
                marker={"symbol": symbol, "size": 11, "color": "#888"},
                hoverinfo="skip"))

    fig.update_layout(
        height=height, margin={"l": 8, "r": 8, "t": 30, "b": 8},
        clickmode="event+select", dragmode="select", uirevision="graph",
        plot_bgcolor="white",
        legend={"orientation": "h", "x": 0, "y": 1.0, "yanchor": "bottom"},
        xaxis={"visible": False, "showgrid": False, "zeroline": False},
        yaxis={"visible": False, "showgrid": False, "zeroline": False,
               "scaleanchor": "x", "scaleratio": 1},
    )
    if n == 0:
        _annotate(fig, "Empty graph: add a node")
    elif drawing.directed and len(drawing.edges) <= MAX_ARROWS:
        fig.update_layout(annotations=_arrows(drawing, xy, marker_size))
    return fig


# --------------------------------------------------------------- helpers
def _annotate(fig: go.Figure, message: str) -> go.Figure:
    """Add a centred message to ``fig``."""
    fig.add_annotation(text=message, x=0.5, y=0.5, xref="paper", yref="paper",
                       showarrow=False, font={"size": 15, "color": "#555"})
    return fig


def _empty_figure(message: str, height: int, uirevision: str) -> go.Figure:
    """A figure with no data, hidden axes and a centred message."""
    fig = go.Figure()
    fig.update_layout(height=height, uirevision=uirevision,
                      xaxis={"visible": False}, yaxis={"visible": False},
                      margin={"l": 10, "r": 10, "t": 30, "b": 10})
    return _annotate(fig, message)


def _step_axis(last_step: float) -> dict:
    """Whole-number step ticks (plotly would put ticks at 1.5, 2.5 on short
    runs): the 1-2-5 spacing of :func:`explorer.linechart.step_tick_spacing`."""
    return {"tickformat": "d", "dtick": step_tick_spacing(last_step)}


def _line_layout(fig: go.Figure, *, height: int, ytitle: str, uirevision: str,
                 title: str | None = None) -> go.Figure:
    """Common layout of the step-by-step line plots."""
    below = bool(title) and len(fig.data) > 1  # a legend under a title would overlap it
    fig.update_layout(
        title=title, height=height, uirevision=uirevision,
        xaxis_title="step", yaxis_title=ytitle, hovermode="x unified",
        xaxis=_step_axis(max((max(tr.x) for tr in fig.data if len(tr.x)), default=1)),
        margin={"l": 50, "r": 10, "t": 40 if title else 20, "b": 100 if below else 40},
        legend={"orientation": "h", "x": 0, "y": -0.3 if below else 1.0,
                "yanchor": "top" if below else "bottom"},
    )
    return fig


# ------------------------------------------------------------ training curves
def loss_figure(steps: Sequence[float], losses: Sequence[float], *,
                title: str = "Training loss", height: int = 300,
                y_range: tuple[float, float] | None = None) -> go.Figure:
    """Training loss against step (``y_range`` fixes the axis, e.g. to compare
    two charts side by side)."""
    if len(steps) == 0:
        return _empty_figure(EMPTY_RUN, height, "loss")
    fig = go.Figure(go.Scatter(x=list(steps), y=list(losses), mode="lines", name="loss"))
    if y_range is not None:
        fig.update_yaxes(range=list(y_range))
    finite = [float(v) for v in losses if math.isfinite(float(v))]
    if len(finite) > 1 and min(finite) == max(finite):  # flat: label the line's value
        lo, hi = y_range if y_range is not None else (finite[0] - 0.05, finite[0] + 0.05)
        ticks = value_ticks(lo, hi, finite[0])
        fig.update_yaxes(range=[lo, hi], tickmode="array", tickvals=list(ticks),
                         ticktext=list(ticks.values()))
    return _line_layout(fig, height=height, ytitle="loss", uirevision="loss", title=title)


def step_time_figure(steps: Sequence[float], wall_s: Sequence[float],
                     causes: Sequence[str], *, height: int = 260) -> go.Figure:
    """Synced time of each step in ms (log axis) with the steps that traced
    and compiled marked in red; hovering one shows why it traced (``causes``:
    ``""`` for a step that reused the compiled step)."""
    if len(steps) == 0:
        return _empty_figure(EMPTY_RUN, height, "step_time")
    ms = [1e3 * float(w) for w in wall_s]
    fig = go.Figure(go.Scatter(x=list(steps), y=ms, mode="lines+markers", name="step",
                               marker={"size": 4}, hovertemplate="%{y:.3g} ms<extra></extra>"))
    traced = [i for i, c in enumerate(causes) if c]
    fig.add_trace(go.Scatter(
        x=[steps[i] for i in traced], y=[ms[i] for i in traced], mode="markers",
        name="traced + compiled", marker={"size": 10, "color": "#d62728", "symbol": "x"},
        text=[causes[i] for i in traced],
        hovertemplate="%{y:.3g} ms, traced: %{text}<extra></extra>"))
    fig.update_yaxes(type="log", dtick=1)  # a tick per power of ten
    return _line_layout(fig, height=height, ytitle="ms (synced)", uirevision="step_time",
                        title="Step time and traces")


# ------------------------------------------------------------------ heatmap
UNCHANGED_COLOUR = "#dce6f0"  # a cell whose variable did not change at that step
FROZEN_RANGE = (-6, -1)  # log10 colour range of a map where nothing changed
CELL_GAP_MAX_STEPS = 120  # more steps than this: no gap between columns
COLOURBAR_TITLE = "‖Δ‖/‖θ‖<br>per step<br>(log scale)"
UNCHANGED_KEY = "0 = unchanged"


def _log_ticks(low: int, high: int) -> tuple[list[int], list[str]]:
    """Colour-bar ticks at whole powers of ten from ``low`` to ``high``
    (log10 values), labelled ``1e-3``, ``1``, ``10``, …; at most ~8 ticks."""
    every = max(1, math.ceil((high - low) / 7))
    values = list(range(high, low - 1, -every))[::-1]
    names = {0: "1", 1: "10"}
    return values, [names.get(v, f"1e{v}") for v in values]


def heatmap_figure(paths: Sequence[str], rel_changes, *, steps: Sequence[float] | None = None,
                   height: int | None = None) -> go.Figure:
    """How much each variable (row) changed at each step (column).

    Trace 0 colours ``log10`` of the relative change ``‖Δ‖/‖θ‖`` (a colour bar
    with powers of ten); an infinite change takes the colour of the largest
    finite one. A cell where the variable did not change at all is NaN there
    and drawn by trace 1 in :data:`UNCHANGED_COLOUR` instead, so every cell of
    the variables × steps grid shows, with white gaps between cells; a swatch
    of that colour under the colour bar reads "0 = unchanged".

    When nothing changed anywhere (frozen training), the colour range is fixed
    to :data:`FROZEN_RANGE` rather than collapsing to one tick (trace 2, an
    empty marker trace, draws that colour bar: plotly draws none for an
    all-blank heatmap), and the map says "Frozen: no parameter changed in any
    of N steps".
    """
    if height is None:
        height = max(250, 22 * len(paths) + 120)
    rel = np.asarray(rel_changes, dtype=np.float64)
    if len(paths) == 0 or rel.size == 0:
        return _empty_figure(EMPTY_RUN, height, "heatmap")
    rel = rel.reshape(len(paths), -1)
    num_steps = rel.shape[1]
    x = list(range(1, num_steps + 1)) if steps is None else list(steps)
    if len(x) != num_steps:
        raise ValueError(f"got {len(x)} steps for {num_steps} columns")

    finite = np.isfinite(rel) & (rel > 0)
    z = np.full(rel.shape, np.nan)
    z[finite] = np.log10(rel[finite])
    z[np.isposinf(rel)] = np.max(z[finite]) if finite.any() else 0.0
    frozen = not np.any(rel > 0)
    if frozen:
        low, high = FROZEN_RANGE
    else:
        shown = z[np.isfinite(z)]
        low, high = math.floor(shown.min()), math.ceil(shown.max())
        if high - low < 1:  # every change the same power of ten: keep a readable bar
            low, high = low - 1, high + 1
    tickvals, ticktext = _log_ticks(low, high)
    hover = [["unchanged" if v == 0 else f"{v:.3g}" for v in row] for row in rel]
    gap = 1 if num_steps <= CELL_GAP_MAX_STEPS else 0
    unchanged = np.where(rel == 0, 0.0, np.nan)

    colorbar = {"title": {"text": COLOURBAR_TITLE}, "tickvals": tickvals,
                "ticktext": ticktext, "len": 0.78, "y": 1.0, "yanchor": "top"}
    traces = [
        go.Heatmap(
            z=z, x=x, y=list(paths), customdata=rel, text=hover, zmin=low, zmax=high,
            hovertemplate="%{y}<br>step %{x}<br>‖Δ‖/‖θ‖ = %{text}<extra></extra>",
            colorscale="Viridis", xgap=gap, ygap=1, colorbar=colorbar, showscale=not frozen),
        # the "no change" cells, with a one-colour swatch under the colour bar as their key
        go.Heatmap(
            z=unchanged, x=x, y=list(paths), text=hover, name=UNCHANGED_KEY,
            colorscale=[[0, UNCHANGED_COLOUR], [1, UNCHANGED_COLOUR]], zmin=0, zmax=1,
            xgap=gap, ygap=1, showscale=True,
            colorbar={"tickvals": [0.5], "ticktext": [UNCHANGED_KEY], "ticks": "",
                      "lenmode": "pixels", "len": 38, "ypad": 10, "thickness": 18, "y": 0.0,
                      "yanchor": "bottom", "outlinewidth": 1, "outlinecolor": "#999"},
            hovertemplate="%{y}<br>step %{x}<br>‖Δ‖/‖θ‖ = 0 (unchanged)<extra></extra>"),
    ]
    if frozen:
        # plotly draws no colour bar for a heatmap without a single value, so an
        # empty marker trace carries the same bar: the scale stays visible
        traces.append(go.Scatter(
            x=[None], y=[None], mode="markers", showlegend=False, hoverinfo="skip",
            name="colour bar", marker={"color": [low], "cmin": low, "cmax": high,
                                       "colorscale": "Viridis", "showscale": True,
                                       "colorbar": colorbar}))
    fig = go.Figure(traces)
    fig.update_layout(
        height=height, uirevision="heatmap", xaxis_title="step",
        xaxis={**_step_axis(max(x, default=1)), "showgrid": False, "zeroline": False},
        yaxis={"autorange": "reversed", "automargin": True, "type": "category",
               "showgrid": False},
        margin={"l": 10, "r": 10, "t": 20, "b": 40}, plot_bgcolor="white",
    )
    if frozen:
        steps_text = "1 step" if num_steps == 1 else f"{num_steps} steps"
        fig.add_annotation(
            text=f"<b>Frozen: no parameter changed in any of {steps_text}</b><br>"
                 "every cell is 0 (unchanged): training is frozen",
            x=0.5, y=0.5, xref="paper", yref="paper", showarrow=False,
            font={"size": 15, "color": "#8b1a1a"}, bgcolor="rgba(255,255,255,0.9)",
            bordercolor="#8b1a1a", borderwidth=1, borderpad=8)
    return fig


def mask_figure(masks, *, height: int = 170) -> go.Figure:
    """Dropout masks, one row per draw (1 = unit kept, 0 = dropped): identical
    rows are the frozen-dropout symptom."""
    z = np.asarray(masks, dtype=np.float64)
    if z.ndim != 2 or z.size == 0:
        return _empty_figure("No masks drawn", height, "masks")
    fig = go.Figure(go.Heatmap(
        z=z, x=list(range(z.shape[1])), y=[f"draw {i + 1}" for i in range(z.shape[0])],
        zmin=0, zmax=1, colorscale=[[0, "#f2f2f2"], [1, "#1f77b4"]], showscale=False,
        xgap=2, ygap=2, hovertemplate="%{y}, unit %{x}: %{z}<extra></extra>"))
    fig.update_layout(height=height, xaxis_title="unit (blue = kept)",
                      yaxis={"autorange": "reversed"}, uirevision="masks",
                      margin={"l": 10, "r": 10, "t": 10, "b": 40}, plot_bgcolor="white")
    return fig


# --------------------------------------------------------------- comparisons
def race_figure(curves: Mapping[str, Sequence[float]], *, height: int = 360) -> go.Figure:
    """Loss against step, one line per JIT mode, all from the same initial
    weights. A perfectly flat curve (nothing trained) is dashed and its legend
    name ends in " (flat)"."""
    title = "Loss per mode, same initial weights"
    if not curves:
        return _empty_figure("No modes to compare", height, "race")
    fig = go.Figure()
    for mode, losses in curves.items():
        losses = np.asarray(losses, dtype=np.float64)
        flat = losses.size > 1 and bool(np.all(losses == losses[0]))
        fig.add_trace(go.Scatter(
            x=list(range(1, losses.size + 1)), y=losses, mode="lines",
            name=f"{mode} (flat)" if flat else mode,
            line={"dash": "dash" if flat else "solid"}))
    return _line_layout(fig, height=height, ytitle="loss", uirevision="race", title=title)


def _seconds(value) -> float | None:
    """``value`` as a float, or ``None`` when it is missing or NaN."""
    if value is None:
        return None
    value = float(value)
    return None if math.isnan(value) else value


def timing_figure(rows: Sequence[Mapping], *, height: int = 300) -> go.Figure:
    """Where the time goes, per mode: grouped horizontal bars for tracing and
    lowering, XLA compilation and the first call, in seconds on a linear axis.
    A missing value (None or NaN, e.g. eager has no compile) is a zero-length
    bar whose hover says "n/a"."""
    if not rows:
        return _empty_figure("No timings yet", height, "timing")
    modes = [str(row["mode"]) for row in rows]
    fig = go.Figure()
    for key, name in (("trace_lower_s", "trace + lower (s)"),
                      ("compile_s", "XLA compile (s)"),
                      ("first_call_s", "first call (s)")):
        values = [_seconds(row.get(key)) for row in rows]
        fig.add_trace(go.Bar(
            x=[0.0 if v is None else v for v in values], y=modes, orientation="h",
            name=name, hovertext=["n/a" if v is None else f"{v:.3g} s" for v in values],
            hovertemplate="%{y}: %{hovertext}<extra>" + name + "</extra>"))
    fig.update_layout(
        barmode="group", height=height, uirevision="timing",
        xaxis={"title": "seconds", "type": "linear"},
        yaxis={"autorange": "reversed", "automargin": True},
        margin={"l": 10, "r": 10, "t": 20, "b": 40},
        legend={"orientation": "h", "x": 0, "y": 1.0, "yanchor": "bottom"},
    )
    return fig

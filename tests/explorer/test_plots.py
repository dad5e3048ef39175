"""Tests for explorer.plots: trace layout the UI relies on, colours, heatmap
blanks, flat-curve detection and timing gaps."""

import math
import re

import numpy as np
import pytest

from explorer import plots
from explorer.drawing import Drawing, from_preset

HEX = re.compile(r"^#[0-9a-f]{6}$")


@pytest.fixture(scope="module")
def karate():
    return from_preset("karate")


def small(directed=False, n=4):
    """A path graph 0-1-...-(n-1); node 2 has no position and no label."""
    positions = [(float(i), float(i % 2)) for i in range(n)]
    positions[2] = None
    labels = [i % 2 for i in range(n)]
    labels[2] = -1
    return Drawing(names=tuple(f"n{i}" for i in range(n)), labels=tuple(labels),
                   positions=tuple(positions),
                   edges=tuple((i, i + 1) for i in range(n - 1)), directed=directed)


def figure(drawing, **kwargs):
    colours = plots.label_colours(drawing.labels)
    return plots.graph_figure(drawing, colours=colours, **kwargs)


def annotation_texts(fig):
    return [a.text for a in fig.layout.annotations]


# ------------------------------------------------------------------ colours
def test_palette_and_label_colours():
    assert len(plots.PALETTE) >= 10
    assert len(set(plots.PALETTE)) == len(plots.PALETTE)
    assert plots.UNLABELLED not in plots.PALETTE
    colours = plots.label_colours([0, 1, -1, len(plots.PALETTE)])
    assert colours == [plots.PALETTE[0], plots.PALETTE[1], plots.UNLABELLED, plots.PALETTE[0]]
    assert all(HEX.match(c) for c in colours)


def test_embedding_colours_valid_and_deterministic():
    h = np.random.default_rng(0).normal(size=(20, 8))
    colours = plots.embedding_colours(h)
    assert len(colours) == 20 and all(HEX.match(c) for c in colours)
    assert plots.embedding_colours(h.copy()) == colours
    assert len(set(colours)) > 10  # distinct embeddings, distinct colours


def test_embedding_colours_invariant_to_sign_flip_and_scale():
    h = np.random.default_rng(1).normal(size=(15, 5)) * [5, 3, 2, 1, 0.5]
    base = plots.embedding_colours(h)
    for column in range(h.shape[1]):
        flipped = h.copy()
        flipped[:, column] *= -1
        assert plots.embedding_colours(flipped) == base
    assert plots.embedding_colours(h * 7.5) == base
    assert plots.embedding_colours(h + 3.0) == base


def test_embedding_colours_degenerate_inputs():
    assert plots.embedding_colours(np.zeros((0, 4))) == []
    assert plots.embedding_colours(np.ones((1, 4))) == ["#808080"]
    assert plots.embedding_colours(np.full((5, 3), 0.1)) == ["#808080"] * 5
    one_dim = plots.embedding_colours(np.arange(4.0)[:, None])
    assert one_dim[0] == "#ff8080" and one_dim[-1] == "#008080"  # first node wins a tie
    two_dim = plots.embedding_colours(np.random.default_rng(2).normal(size=(6, 2)))
    assert all(HEX.match(c) and c.endswith("80") for c in two_dim)
    nan = plots.embedding_colours(np.array([[np.nan, 1.0], [0.0, 1.0]]))
    assert all(HEX.match(c) for c in nan)


# -------------------------------------------------------------------- graph
def test_graph_trace_order_and_customdata(karate):
    fig = figure(karate)
    assert plots.NODE_TRACE == 1
    edges, nodes = fig.data[0], fig.data[plots.NODE_TRACE]
    assert edges.mode == "lines" and edges.hoverinfo == "skip"
    assert sum(v is None for v in edges.x) == len(karate.edges)
    assert nodes.mode == "markers+text"
    assert list(nodes.customdata) == list(range(karate.num_nodes))
    assert list(nodes.marker.color) == plots.label_colours(karate.labels)
    assert all(trace.x == (None,) for trace in fig.data[2:])
    layout = fig.layout
    assert layout.clickmode == "event+select" and layout.dragmode == "select"
    assert layout.uirevision == "graph" and layout.yaxis.scaleanchor == "x"
    assert layout.xaxis.visible is False and layout.height == 480


def test_graph_hover_text_and_missing_positions():
    drawing = small()
    nodes = figure(drawing).data[plots.NODE_TRACE]
    assert nodes.hovertext[2] == "node n2, label -1"
    assert (nodes.x[2], nodes.y[2]) == (0.0, 0.0)
    custom = figure(drawing, hover=["a", "b", "c", "d"]).data[plots.NODE_TRACE]
    assert list(custom.hovertext) == ["a", "b", "c", "d"]


def test_graph_many_nodes_has_no_text():
    n = plots.MAX_NODE_TEXT + 1
    drawing = Drawing(names=tuple(map(str, range(n))), labels=(0,) * n,
                      positions=((0.0, 0.0),) * n)
    assert figure(drawing).data[plots.NODE_TRACE].mode == "markers"


def test_split_symbols_and_legend_traces():
    drawing = small()
    splits = ["train", "val", "test", "train"]
    fig = figure(drawing, splits=splits)
    symbols = list(fig.data[plots.NODE_TRACE].marker.symbol)
    assert symbols == [plots.SPLIT_SYMBOLS[s] for s in splits]
    assert len(set(plots.SPLIT_SYMBOLS.values())) == len(plots.SPLIT_SYMBOLS)
    assert [t.name for t in fig.data[2:]] == ["train nodes", "val nodes", "test nodes"]
    default = figure(drawing)
    assert set(default.data[plots.NODE_TRACE].marker.symbol) == {plots.SPLIT_SYMBOLS["none"]}
    assert [t.name for t in default.data[2:]] == ["none nodes"]
    with pytest.raises(ValueError, match="unknown splits"):
        figure(drawing, splits=["train", "bogus", "val", "test"])


def test_selected_outline():
    line = figure(small(), selected=[1, 3]).data[plots.NODE_TRACE].marker.line
    assert list(line.width) == [1, 3, 1, 3]
    assert line.color[1] == "#111" and line.color[0] == "white"


def test_directed_arrows_one_per_edge(karate):
    directed = small(directed=True, n=6)
    assert len(figure(directed).layout.annotations) == len(directed.edges)
    assert len(figure(small(n=6)).layout.annotations) == 0
    assert len(figure(karate).layout.annotations) == 0
    arrow = figure(directed).layout.annotations[0]
    assert (arrow.axref, arrow.ayref) == ("x", "y") and arrow.standoff > 0
    assert (arrow.ax, arrow.x) == (0.0, 1.0)  # from source to target


def test_many_directed_edges_have_no_arrows():
    n = 40
    edges = tuple((u, v) for u in range(n) for v in range(n) if u != v)[:301]
    drawing = Drawing(names=tuple(map(str, range(n))), labels=(0,) * n,
                      positions=tuple((float(i), 0.0) for i in range(n)),
                      edges=edges, directed=True)
    assert len(figure(drawing).layout.annotations) == 0


def test_empty_drawing():
    fig = plots.graph_figure(Drawing(), colours=[])
    assert annotation_texts(fig) == ["Empty graph: add a node"]
    assert len(fig.data[plots.NODE_TRACE].customdata) == 0


def test_colour_count_must_match():
    with pytest.raises(ValueError, match="colours"):
        plots.graph_figure(small(), colours=["#000000"])


# ------------------------------------------------------------- line plots
def test_loss_figure():
    empty = plots.loss_figure([], [])
    assert annotation_texts(empty) == ["Press Step or Play"]
    loss = plots.loss_figure([1, 2, 3], [1.0, 0.5, 0.2])
    assert [t.name for t in loss.data] == ["loss"] and loss.layout.uirevision == "loss"
    assert loss.layout.xaxis.title.text == "step" and loss.layout.yaxis.title.text == "loss"


# ---------------------------------------------------------------- heatmap
def test_heatmap_blank_where_unchanged_and_inf():
    rel = np.array([[1e-3, 0.0, np.inf], [1e-1, 1e-2, 0.0]])
    fig = plots.heatmap_figure(["a/w", "a/b"], rel)
    z = np.asarray(fig.data[0].z, dtype=float)
    assert np.isnan(z[0, 1]) and np.isnan(z[1, 2])
    assert z[0, 0] == pytest.approx(-3.0) and z[1, 0] == pytest.approx(-1.0)
    assert z[0, 2] == pytest.approx(-1.0)  # inf shows as the largest finite value
    assert list(fig.data[0].x) == [1, 2, 3]
    assert fig.data[0].text[0][1] == "unchanged" and fig.data[0].text[1][0] == "0.1"
    assert fig.data[0].colorbar.title.text == plots.COLOURBAR_TITLE
    assert annotation_texts(fig) == []
    assert fig.layout.height == max(250, 22 * 2 + 120)


def test_heatmap_frozen_and_empty():
    frozen = plots.heatmap_figure(["w", "b"], np.zeros((2, 4)), steps=[5, 6, 7, 8])
    assert np.all(np.isnan(np.asarray(frozen.data[0].z, dtype=float)))
    assert list(frozen.data[0].x) == [5, 6, 7, 8]
    assert any("training is frozen" in t for t in annotation_texts(frozen))
    empty = plots.heatmap_figure(["w"], np.zeros((1, 0)))
    assert annotation_texts(empty) == ["Press Step or Play"]


def test_frozen_heatmap_draws_the_grid_a_fixed_scale_and_says_frozen():
    """A frozen run (every relative change exactly 0): every cell is drawn in
    the "no change" colour, the colour bar keeps a fixed range of labelled
    powers of ten, and the map says it is frozen."""
    paths = ["layers/0/kernel  (parameter)", "layers/0/bias  (parameter)",
             "opt/step  (optimizer)"]
    fig = plots.heatmap_figure(paths, np.zeros((3, 4)), steps=[1, 2, 3, 4])
    changes, unchanged, bar = fig.data
    assert np.all(np.isnan(np.asarray(changes.z, dtype=float)))
    assert np.array_equal(np.asarray(unchanged.z, dtype=float), np.zeros((3, 4)))
    assert list(unchanged.x) == [1, 2, 3, 4] and list(unchanged.y) == paths
    assert {c[1] for c in unchanged.colorscale} == {plots.UNCHANGED_COLOUR}
    assert list(unchanged.colorbar.ticktext) == ["0 = unchanged"] and unchanged.showscale
    assert changes.xgap >= 1 and changes.ygap >= 1 and unchanged.xgap >= 1  # cell borders
    assert (changes.zmin, changes.zmax) == plots.FROZEN_RANGE == (-6, -1)
    # an all-blank heatmap gets no colour bar from plotly: an empty trace carries it
    assert not changes.showscale and bar.marker.showscale and list(bar.x) == [None]
    assert (bar.marker.cmin, bar.marker.cmax) == (-6, -1)
    assert bar.marker.colorscale == changes.colorscale
    assert list(bar.marker.colorbar.tickvals) == [-6, -5, -4, -3, -2, -1]
    assert list(bar.marker.colorbar.ticktext) == ["1e-6", "1e-5", "1e-4", "1e-3", "1e-2",
                                                  "1e-1"]
    assert bar.marker.colorbar.title.text == plots.COLOURBAR_TITLE
    assert fig.layout.xaxis.tickformat == "d" and fig.layout.xaxis.dtick == 1
    assert fig.layout.xaxis.title.text == "step"
    assert fig.layout.yaxis.type == "category" and fig.layout.yaxis.autorange == "reversed"
    texts = annotation_texts(fig)
    assert len(texts) == 1 and "Frozen: no parameter changed in any of 4 steps" in texts[0]
    one = plots.heatmap_figure(["w"], np.zeros((1, 1)))
    assert "in any of 1 step<" in annotation_texts(one)[0]


def test_training_heatmap_keeps_informative_colours():
    rng = np.random.default_rng(0)
    rel = 10.0 ** rng.uniform(-4.5, -1.2, size=(3, 5))
    rel[2, 0] = 0.0  # one variable unchanged at one step
    fig = plots.heatmap_figure(["a", "b", "c"], rel)
    changes, unchanged = fig.data  # no colour-bar carrier: the heatmap draws its own
    assert changes.showscale is not False
    z = np.asarray(changes.z, dtype=float)
    assert np.isnan(z[2, 0]) and np.all(np.isfinite(np.delete(z.ravel(), 10)))
    u = np.asarray(unchanged.z, dtype=float)
    assert u[2, 0] == 0 and np.isnan(np.delete(u.ravel(), 10)).all()
    assert changes.colorscale == plots.go.Heatmap(colorscale="Viridis").colorscale
    assert changes.zmin <= np.nanmin(z) and changes.zmax >= np.nanmax(z)
    assert (changes.zmin, changes.zmax) == (-5, -1)  # the data's decades, not a fixed range
    assert list(changes.colorbar.tickvals) == [-5, -4, -3, -2, -1]
    assert changes.colorbar.ticktext[0] == "1e-5"
    assert annotation_texts(fig) == []
    # every change in one decade: the bar still spans more than one tick
    same = plots.heatmap_figure(["w"], np.ones((1, 3)))
    bar = same.data[0]
    assert (bar.zmin, bar.zmax) == (-1, 1) and list(bar.colorbar.ticktext) == ["1e-1", "1", "10"]
    # a wide range: at most eight ticks, still whole powers of ten ending at the top
    wide = plots.heatmap_figure(["w"], [[1e-12, 1.0]]).data[0]
    assert len(wide.colorbar.tickvals) <= 8 and wide.colorbar.tickvals[-1] == 0


# ------------------------------------------------------------- comparisons
def test_race_flat_curve():
    fig = plots.race_figure({"eager": [1.0, 0.5, 0.2], "broken": [0.7, 0.7, 0.7]})
    assert [t.name for t in fig.data] == ["eager", "broken (flat)"]
    assert fig.data[0].line.dash == "solid" and fig.data[1].line.dash == "dash"
    assert list(fig.data[0].x) == [1, 2, 3]
    assert fig.layout.title.text == "Loss per mode, same initial weights"


def test_timing_missing_values_are_zero():
    rows = [
        {"mode": "eager", "trace_lower_s": None, "compile_s": math.nan,
         "first_call_s": 0.02, "steady_step_ms": 3.0},
        {"mode": "jit", "trace_lower_s": 0.5, "compile_s": 1.25,
         "first_call_s": 1.9, "steady_step_ms": 0.4},
    ]
    fig = plots.timing_figure(rows)
    assert [t.name for t in fig.data] == ["trace + lower (s)", "XLA compile (s)",
                                          "first call (s)"]
    compile_bar = fig.data[1]
    assert list(compile_bar.x) == [0.0, 1.25] and list(compile_bar.y) == ["eager", "jit"]
    assert compile_bar.hovertext[0] == "n/a" and compile_bar.hovertext[1] == "1.25 s"
    assert fig.layout.barmode == "group" and fig.layout.xaxis.type == "linear"
    assert fig.layout.xaxis.title.text == "seconds"


@pytest.mark.parametrize("last, spacing", [(3, 1), (10, 1), (25, 5), (100, 10), (1000, 100)])
def test_step_axes_tick_whole_steps(last, spacing):
    steps = list(range(1, last + 1))
    for fig in (plots.loss_figure(steps, [1.0] * last),
                plots.heatmap_figure(["w"], np.ones((1, last)))):
        assert fig.layout.xaxis.dtick == spacing and fig.layout.xaxis.tickformat == "d"

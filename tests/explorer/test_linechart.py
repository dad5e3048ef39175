"""Tests for explorer.linechart: the train panel's SVG loss and accuracy charts
(what is drawn where, ticks, flat and broken curves, left-out splits, hover
text, thinning of long runs)."""

import math
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from explorer import linechart as lc

NS = {"s": "http://www.w3.org/2000/svg"}


def parse(svg: str) -> ET.Element:
    root = ET.fromstring(svg)  # well-formed XML, or this raises
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    return root


def texts(root) -> list[str]:
    return [t.text for t in root.iter("{http://www.w3.org/2000/svg}text")]


def points(poly) -> np.ndarray:
    return np.array([[float(v) for v in p.split(",")] for p in poly.get("points").split()])


def plot_box(root) -> tuple[float, float, float, float]:
    """(left, top, right, bottom) of the plot area's frame."""
    frame = next(r for r in root.iter("{http://www.w3.org/2000/svg}rect")
                 if r.get("class") == f"{lc.CSS_CLASS}-frame")
    x, y = float(frame.get("x")), float(frame.get("y"))
    return x, y, x + float(frame.get("width")), y + float(frame.get("height"))


def series(root) -> dict[str, ET.Element]:
    return {g.get("data-series"): g for g in root.iter("{http://www.w3.org/2000/svg}g")
            if g.get("data-series")}


def tick_labels(root, axis: str) -> list[str]:
    """The tick labels left of the plot (``"y"``) or under it (``"x"``)."""
    left, top, right, bottom = plot_box(root)
    out = []
    for t in root.iter("{http://www.w3.org/2000/svg}text"):
        x, y = float(t.get("x", "nan")), float(t.get("y", "nan"))
        if axis == "y" and t.get("text-anchor") == "end" and x < left and top - 5 <= y:
            out.append(t.text)
        if axis == "x" and bottom < y < bottom + 20 and t.text != "step":
            out.append(t.text)
    return out


def test_an_empty_run_says_what_to_press():
    root = parse(lc.loss_chart([], []))
    assert root.get("data-points") == "0" and root.get("aria-label") == "Training loss"
    assert texts(root) == ["Training loss", lc.EMPTY_RUN]
    assert not series(root)
    acc = parse(lc.accuracy_chart([], [], [], []))
    assert texts(acc) == ["Accuracy", lc.EMPTY_RUN]


def test_a_loss_curve_falls_from_top_to_bottom_of_the_plot():
    steps, losses = [1, 2, 3, 4], [1.0, 0.7, 0.4, 0.1]
    root = parse(lc.loss_chart(steps, losses))
    assert root.get("data-points") == "4"
    left, top, right, bottom = plot_box(root)
    (line,) = series(root).values()
    xy = points(line.find("s:polyline", NS))
    assert len(xy) == 4 and np.all(np.diff(xy[:, 0]) > 0) and np.all(np.diff(xy[:, 1]) > 0)
    assert xy[0, 0] == pytest.approx(left) and xy[-1, 0] == pytest.approx(right)
    pad = 0.05 * (bottom - top) / 1.1  # 5 % of the value range above and below
    assert xy[0, 1] == pytest.approx(top + pad, abs=0.2)
    assert xy[-1, 1] == pytest.approx(bottom - pad, abs=0.2)
    assert len(line.findall("s:circle", NS)) == 4  # a short run: a dot per step
    assert "step" in texts(root) and "loss" in texts(root)


@pytest.mark.parametrize("last, spacing", [(3, 1), (10, 1), (25, 5), (100, 10), (1000, 100)])
def test_step_ticks_are_whole_steps(last, spacing):
    steps = list(range(1, last + 1))
    assert lc.step_tick_spacing(last) == spacing
    root = parse(lc.loss_chart(steps, np.linspace(1, 0, last)))
    labels = [int(t) for t in tick_labels(root, "x")]
    assert labels == list(range(spacing, last + 1, spacing))


def test_a_flat_loss_is_labelled_with_its_exact_value():
    """Frozen training: every step the same loss. The axis narrows around it and
    its tick reads the value to six digits; no round tick crowds it."""
    root = parse(lc.loss_chart([1, 2, 3], [0.689058] * 3))
    labels = tick_labels(root, "y")
    assert "0.689058" in labels
    assert "0.68" not in labels and "0.7" not in labels  # within 12 % of the range
    left, top, right, bottom = plot_box(root)
    ys = points(series(root)["loss"].find("s:polyline", NS))[:, 1]
    assert np.all(ys == ys[0]) and ys[0] == pytest.approx((top + bottom) / 2, abs=0.2)
    # with a fixed range (a lesson's two charts side by side) the value still shows
    fixed = parse(lc.loss_chart([1, 2, 3], [0.689058] * 3, y_range=(0.58, 0.70)))
    assert "0.689058" in tick_labels(fixed, "y")
    falling = parse(lc.loss_chart([1, 2, 3], [0.7, 0.65, 0.6]))
    assert not any(len(t) > 5 for t in tick_labels(falling, "y"))  # round ticks only


def test_non_finite_values_break_the_line():
    root = parse(lc.loss_chart([1, 2, 3, 4, 5], [1.0, math.nan, 0.5, 0.4, math.inf]))
    g = series(root)["loss"]
    polys = g.findall("s:polyline", NS)
    assert [len(points(p)) for p in polys] == [2]  # steps 3-4
    dots = [(float(c.get("cx")), float(c.get("cy"))) for c in g.findall("s:circle", NS)]
    assert len(dots) == 3  # steps 1, 3 and 4: the lone step 1 is a dot, not lost
    hover = [t.text for t in root.iter("{http://www.w3.org/2000/svg}title")]
    assert "step 2: loss nan" in hover and "step 5: loss inf" in hover


def test_accuracy_leaves_out_empty_splits_and_says_so():
    steps = [1, 2, 3]
    root = parse(lc.accuracy_chart(steps, [0.5, 0.7, 0.9], [0.0] * 3, [0.0] * 3,
                                   empty=["val", "test"]))
    assert list(series(root)) == ["train"]  # no fake 0 % lines
    assert "no val / test nodes: curves left out" in texts(root)
    assert "train" in texts(root)  # the lone curve is still named
    one = parse(lc.accuracy_chart(steps, [0.5] * 3, [0.2] * 3, [0.0] * 3, empty=["test"],
                                  unit="graphs"))
    assert list(series(one)) == ["train", "val"]
    assert "no test graphs: curve left out" in texts(one)
    full = parse(lc.accuracy_chart(steps, [0.5] * 3, [0.2] * 3, [0.0] * 3))
    assert list(series(full)) == ["train", "val", "test"]  # a real 0 % stays
    assert not any("left out" in t for t in texts(full))
    left, top, right, bottom = plot_box(full)
    zero = points(series(full)["test"].find("s:polyline", NS))[:, 1]
    assert np.all(zero == pytest.approx(bottom))  # 0 sits on the axis' floor
    nan = parse(lc.accuracy_chart(steps, [0.1, 0.5, 1.0], [math.nan] * 3, [0.2, 0.3, 0.4]))
    assert list(series(nan)) == ["train", "test"]
    colours = {name: g.find("s:polyline", NS).get("stroke") for name, g in series(full).items()}
    assert colours == lc.SPLIT_COLOURS
    with pytest.raises(ValueError, match="unknown splits"):
        lc.accuracy_chart(steps, [0.5] * 3, [0.2] * 3, [0.0] * 3, empty=["dev"])


def test_hover_bands_tile_the_plot_and_name_each_steps_values():
    n = 300
    steps = list(range(1, n + 1))
    train = np.linspace(0, 1, n)
    root = parse(lc.accuracy_chart(steps, train, train / 2, train / 4))
    bands = [r for r in root.iter("{http://www.w3.org/2000/svg}rect")
             if r.get("class") == f"{lc.CSS_CLASS}-hover"]
    assert len(bands) == lc.HOVER_BANDS
    left, top, right, bottom = plot_box(root)
    xs = [(float(b.get("x")), float(b.get("x")) + float(b.get("width"))) for b in bands]
    assert xs[0][0] == pytest.approx(left) and xs[-1][1] == pytest.approx(right, abs=0.1)
    assert all(abs(a[1] - b[0]) < 0.11 for a, b in zip(xs, xs[1:]))  # no gaps, no overlaps
    last = bands[-1].find("s:title", NS).text
    assert last == "step 300: train 1, val 0.5, test 0.25"
    short = parse(lc.loss_chart([1, 2], [0.5, 0.25]))
    titles = [t.text for t in short.iter("{http://www.w3.org/2000/svg}title")]
    assert titles == ["step 1: loss 0.5", "step 2: loss 0.25"]


def test_a_long_run_is_thinned_but_keeps_its_extremes():
    n = 100_000
    rng = np.random.default_rng(0)
    losses = 1.0 / np.arange(1, n + 1) + 0.01 * rng.random(n)
    losses[54_321] = 3.0  # one spike must survive the thinning
    svg = lc.loss_chart(np.arange(1, n + 1), losses)
    root = parse(svg)
    assert root.get("data-points") == str(n)
    xy = points(series(root)["loss"].find("s:polyline", NS))
    left, top, right, bottom = plot_box(root)
    assert len(xy) <= 4 * (right - left + 1)
    assert xy[:, 1].min() == pytest.approx(top + 0.05 * (bottom - top) / 1.1, abs=0.2)
    assert len(svg) < 60_000  # sent to the browser every second while training
    assert not series(root)["loss"].findall("s:circle", NS)  # no dots on a long run


def test_markup_is_escaped_and_lengths_must_match():
    root = parse(lc.line_chart([1], [lc.Line("<b>x</b>", [1.0], "#000")],
                               title="a < b & 'c'", ytitle="y", height=200))
    assert root.get("aria-label") == "a < b & 'c'" and "a < b & 'c'" in texts(root)
    assert list(series(root)) == ["<b>x</b>"]
    with pytest.raises(ValueError, match="2 values for 3 steps"):
        lc.loss_chart([1, 2, 3], [1.0, 0.5])


def test_the_same_run_gives_the_same_markup():
    args = ([1, 2, 3], [0.5, 0.6, 0.7], [0.4, 0.5, 0.6], [0.3, 0.4, 0.5])
    assert lc.accuracy_chart(*args) == lc.accuracy_chart(*args)
    assert lc.loss_chart(*args[:2]) != lc.loss_chart(*args[:2], title="Other")

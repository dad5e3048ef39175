"""Light line charts: the train panel's loss and accuracy curves as SVG markup.

The live charts are on every first page, and Plotly's browser code (4.7 MB) was
what a new session waited for most: with these charts as plain SVG the page
needs no chart code until a Diagnose tab asks for one. Python builds the whole
drawing (axes, ticks, one polyline per series); the browser only shows it.
Hovering a step shows its values (an SVG ``<title>`` per band of steps).

Nothing here imports Streamlit or Plotly; :mod:`explorer.plots` takes its step
ticks, value ticks, empty-run text and accuracy splits from here, so both kinds
of chart follow the same rules.
"""

from __future__ import annotations

import dataclasses
import html
import math
import zlib
from collections.abc import Collection, Sequence

import numpy as np

__all__ = ["EMPTY_RUN", "Line", "accuracy_chart", "accuracy_lines", "line_chart",
           "loss_chart", "nice_ticks", "step_tick_spacing", "value_ticks"]

EMPTY_RUN = "Press Step or Play"
SPLITS = ("train", "val", "test")
SPLIT_COLOURS = {"train": "#1f77b4", "val": "#ff7f0e", "test": "#2ca02c"}
LOSS_COLOUR = "#1f77b4"

WIDTH = 480  # the drawing's own units; the SVG scales to its column's width
LEFT, RIGHT, TOP, BOTTOM = 70, 14, 34, 38  # margins around the plot area
HOVER_BANDS = 120  # at most this many hover bands (one <title> each)
MARKERS_UP_TO = 40  # steps; a shorter run also gets a dot per point
# text and axes in the page's own text colour (currentColor): readable in
# Streamlit's light and dark themes alike
FONT = "font-family='sans-serif' font-size='12' fill='currentColor' fill-opacity='0.8'"
CSS_CLASS = "gc-linechart"


@dataclasses.dataclass(frozen=True)
class Line:
    """One series: its legend name, one value per step, its colour."""

    name: str
    values: Sequence[float]
    colour: str


def step_tick_spacing(last_step: float) -> int:
    """Whole-number step ticks, 1-2-5 spaced, at most about 10 of them."""
    spacing = 1
    while last_step / spacing > 10:
        for factor in (2, 2.5, 2):  # 1, 2, 5, 10, 20, 50, ...
            spacing *= factor
            if last_step / spacing <= 10:
                break
    return int(spacing)


def nice_ticks(lo: float, hi: float, count: int = 4) -> list[float]:
    """About ``count`` round values between ``lo`` and ``hi``."""
    span = hi - lo
    if not span > 0:
        return []
    step = 10 ** math.floor(math.log10(span / count))
    for factor in (1, 2, 5, 10):
        if span / (step * factor) <= count:
            step *= factor
            break
    first = math.ceil(lo / step) * step
    return [round(first + k * step, 12) for k in range(int((hi - first) / step) + 1)]


def value_ticks(lo: float, hi: float, flat: float | None = None) -> dict[float, str]:
    """The value axis' ticks and their labels: round values, and for a flat
    line (frozen training) its exact value to six digits, with no round tick
    close enough to crowd it."""
    labels = {t: f"{t:.3g}" for t in nice_ticks(lo, hi)}
    if flat is not None:
        near = 0.12 * (hi - lo)
        labels = {t: s for t, s in labels.items() if abs(t - flat) > near}
        labels[flat] = f"{flat:.6g}"
    return dict(sorted(labels.items()))


def accuracy_lines(train: Sequence[float], val: Sequence[float], test: Sequence[float],
                   empty: Collection[str] = ()) -> tuple[list[Line], list[str]]:
    """The accuracy series worth drawing, and the splits left out: a split
    named in ``empty`` (it has no nodes or graphs: the engine scores it 0.0)
    and a series that is all NaN are not drawn as a fake 0 % line."""
    unknown = sorted(set(empty) - set(SPLITS))
    if unknown:
        raise ValueError(f"unknown splits {unknown}; use train, val or test")
    lines, missing = [], []
    for name, values in zip(SPLITS, (train, val, test)):
        arr = np.asarray(values, dtype=np.float64)
        if name in empty or not arr.size or np.all(np.isnan(arr)):
            missing.append(name)
        else:
            lines.append(Line(name, arr, SPLIT_COLOURS[name]))
    return lines, missing


def missing_note(missing: Sequence[str], unit: str) -> str:
    """"no test nodes: curve left out" (empty when nothing is missing)."""
    if not missing:
        return ""
    return (f"no {' / '.join(missing)} {unit}: "
            f"{'curve' if len(missing) == 1 else 'curves'} left out")


def loss_chart(steps: Sequence[float], losses: Sequence[float], *,
               title: str = "Training loss", height: int = 260,
               y_range: tuple[float, float] | None = None) -> str:
    """Training loss against step. A flat curve (frozen training) gets a
    narrow axis with its exact value as a tick label."""
    return line_chart(steps, [Line("loss", losses, LOSS_COLOUR)], title=title, ytitle="loss",
                      height=height, y_range=y_range, label_flat=True)


def accuracy_chart(steps: Sequence[float], train: Sequence[float], val: Sequence[float],
                   test: Sequence[float], *, height: int = 240, empty: Collection[str] = (),
                   unit: str = "nodes", title: str = "Accuracy") -> str:
    """Train, val and test accuracy against step, on a 0-1 axis; splits in
    ``empty`` or all NaN are left out and a note above the plot names them
    (``unit``: "nodes", or "graphs" for a dataset)."""
    lines, missing = accuracy_lines(train, val, test, empty)
    return line_chart(steps, lines, title=title, ytitle="accuracy", height=height,
                      y_range=(0.0, 1.02), note=missing_note(missing, unit))


def _fmt(v: float) -> str:
    return f"{v:.4g}" if math.isfinite(v) else str(v)


def _y_range(values: np.ndarray, y_range, label_flat: bool) -> tuple[float, float, float | None]:
    """(low, high, the flat value to label or None)."""
    finite = values[np.isfinite(values)]
    flat = None
    if label_flat and finite.size > 1 and finite.min() == finite.max():
        flat = float(finite[0])
    if y_range is not None:
        return float(y_range[0]), float(y_range[1]), flat
    if not finite.size:
        return 0.0, 1.0, None
    lo, hi = float(finite.min()), float(finite.max())
    if hi == lo:
        return lo - 0.05, hi + 0.05, flat
    pad = 0.05 * (hi - lo)
    return lo - pad, hi + pad, None


def _envelope(idx: np.ndarray, ys: np.ndarray, px: np.ndarray) -> np.ndarray:
    """Indices that keep a long series' shape at the drawing's resolution:
    per column of pixels, its first, lowest, highest and last point."""
    cols = np.floor(px[idx]).astype(np.int64)
    keep = np.zeros(idx.size, bool)
    starts = np.flatnonzero(np.r_[True, cols[1:] != cols[:-1]])
    ends = np.r_[starts[1:], idx.size] - 1
    keep[starts] = keep[ends] = True
    for a, b in zip(starts, ends + 1):
        seg = ys[idx[a:b]]
        keep[a + int(np.argmin(seg))] = keep[a + int(np.argmax(seg))] = True
    return idx[keep]


def line_chart(steps: Sequence[float], lines: Sequence[Line], *, title: str, ytitle: str,
               height: int, y_range: tuple[float, float] | None = None, note: str = "",
               label_flat: bool = False) -> str:
    """The SVG of ``lines`` against ``steps`` (one value per step each; NaN or
    inf breaks a line). Its root carries ``data-points`` (the number of steps
    drawn) for tests and benchmarks. With no steps: the title and
    :data:`EMPTY_RUN`."""
    x = np.asarray(steps, dtype=np.float64)
    n = int(x.size)
    esc = html.escape
    head = (f"<svg class='{CSS_CLASS}' data-points='{n}' role='img' "
            f"aria-label='{esc(title)}' viewBox='0 0 {WIDTH} {height}' width='100%' "
            f"xmlns='http://www.w3.org/2000/svg' style='display:block;max-width:100%'>")
    parts = [head, f"<text x='{LEFT}' y='20' font-family='sans-serif' font-size='15' "
             f"font-weight='bold' fill='currentColor'>{esc(title)}</text>"]
    if n == 0:
        parts.append(f"<text x='{WIDTH / 2}' y='{height / 2}' text-anchor='middle' "
                     f"font-family='sans-serif' font-size='15' fill='currentColor' "
                     f"fill-opacity='0.7'>{esc(EMPTY_RUN)}</text>")
        return "".join(parts) + "</svg>"
    for line in lines:
        if len(line.values) != n:
            raise ValueError(f"{line.name!r} has {len(line.values)} values for {n} steps")
    values = [np.asarray(line.values, dtype=np.float64) for line in lines]
    stacked = np.concatenate(values) if values else np.zeros(0)
    lo, hi, flat = _y_range(stacked, y_range, label_flat)
    x0, x1 = float(x.min()), float(x.max())
    if x1 == x0:
        x0, x1 = x0 - 1, x1 + 1
    pw, ph = WIDTH - LEFT - RIGHT, height - TOP - BOTTOM
    px = LEFT + (x - x0) / (x1 - x0) * pw
    to_y = lambda v: TOP + (hi - v) / (hi - lo) * ph  # noqa: E731

    # grid, ticks and axis titles
    for t, label in value_ticks(lo, hi, flat).items():
        y = to_y(t)
        parts.append(f"<line x1='{LEFT}' x2='{WIDTH - RIGHT}' y1='{y:.1f}' y2='{y:.1f}' "
                     f"stroke='currentColor' stroke-opacity='0.12'/><text x='{LEFT - 6}' "
                     f"y='{y + 4:.1f}' text-anchor='end' {FONT}>{esc(label)}</text>")
    spacing = step_tick_spacing(x1)
    for t in range(int(math.ceil(x0 / spacing)) * spacing, int(x1) + 1, spacing):
        xt = LEFT + (t - x0) / (x1 - x0) * pw
        parts.append(f"<line x1='{xt:.1f}' x2='{xt:.1f}' y1='{TOP}' y2='{TOP + ph}' "
                     f"stroke='currentColor' stroke-opacity='0.07'/><text x='{xt:.1f}' "
                     f"y='{TOP + ph + 16}' text-anchor='middle' {FONT}>{t}</text>")
    parts.append(f"<rect class='{CSS_CLASS}-frame' x='{LEFT}' y='{TOP}' width='{pw}' "
                 f"height='{ph}' fill='none' stroke='currentColor' stroke-opacity='0.3'/>")
    parts.append(f"<text x='{LEFT + pw / 2}' y='{height - 6}' text-anchor='middle' "
                 f"{FONT}>step</text><text transform='translate(13 {TOP + ph / 2}) "
                 f"rotate(-90)' text-anchor='middle' {FONT}>{esc(ytitle)}</text>")

    # the lines: finite runs as polylines, thinned to the drawing's resolution
    clip = f"gc-clip-{zlib.crc32(f'{title}|{ytitle}'.encode()):08x}"
    parts.append(f"<defs><clipPath id='{clip}'><rect x='{LEFT}' y='{TOP - 2}' width='{pw}' "
                 f"height='{ph + 4}'/></clipPath></defs><g clip-path='url(#{clip})'>")
    for line, ys in zip(lines, values):
        parts.append(f"<g data-series='{esc(line.name)}'>")
        ok = np.isfinite(ys)
        breaks = np.flatnonzero(np.diff(ok.astype(np.int8)) != 0) + 1
        for run in np.split(np.arange(n), breaks):
            if not run.size or not ok[run[0]]:
                continue
            keep = _envelope(run, ys, px) if run.size > 2 * pw else run
            pts = " ".join(f"{px[i]:.1f},{to_y(ys[i]):.1f}" for i in keep)
            if keep.size > 1:
                parts.append(f"<polyline points='{pts}' fill='none' stroke='{line.colour}' "
                             f"stroke-width='2' stroke-linejoin='round'/>")
            if n <= MARKERS_UP_TO or keep.size == 1:
                parts.extend(f"<circle cx='{px[i]:.1f}' cy='{to_y(ys[i]):.1f}' r='2.5' "
                             f"fill='{line.colour}'/>" for i in keep)
        parts.append("</g>")
    parts.append("</g>")

    # legend (several lines) and note, in the title's row, right-aligned
    right = WIDTH - RIGHT
    if note:
        parts.append(f"<text x='{right}' y='{TOP - 6}' text-anchor='end' "
                     f"font-family='sans-serif' font-size='11' fill='currentColor' "
                     f"fill-opacity='0.7'>{esc(note)}</text>")
    if len(lines) > 1 or note:  # a lone curve beside a note is named too
        xl = LEFT + 110
        for line in lines:
            parts.append(f"<line x1='{xl}' x2='{xl + 18}' y1='15' y2='15' "
                         f"stroke='{line.colour}' stroke-width='2'/><text x='{xl + 22}' "
                         f"y='19' {FONT}>{esc(line.name)}</text>")
            xl += 34 + 7 * len(line.name)

    # hover: a band per group of steps, its title the values at its last step
    edges = np.linspace(0, n, min(n, HOVER_BANDS) + 1).astype(int)
    for a, b in zip(edges[:-1], edges[1:]):
        i = b - 1
        left = LEFT if a == 0 else (px[a - 1] + px[a]) / 2
        right_x = LEFT + pw if b == n else (px[b - 1] + px[b]) / 2
        text = f"step {x[i]:g}: " + ", ".join(f"{line.name} {_fmt(ys[i])}"
                                              for line, ys in zip(lines, values))
        parts.append(f"<rect class='{CSS_CLASS}-hover' x='{left:.1f}' y='{TOP}' "
                     f"width='{max(right_x - left, 0.5):.1f}' height='{ph}' "
                     f"fill='currentColor' fill-opacity='0'><title>{esc(text)}</title></rect>")
    return "".join(parts) + "</svg>"

"""What one redraw costs the browser: the train panel's two SVG charts, and a
whole Step of the app (issue 18's UI throughput and Play -> first point).

1. **charts**: a small page of this benchmark's own draws the train panel's
   loss and accuracy charts of ``--points`` steps (``explorer.linechart``, as
   the app builds them) and one more step at every click of its button, two
   ways in the same run: the app's ``svg_chart`` (a component that sets the
   markup as HTML) and, as the peer, ``st.markdown(..., unsafe_allow_html=True)``
   (how the app drew them before). Per redraw: the browser renderer's main-thread
   time (Chrome's ``TaskDuration``) and the wall time from the click to the
   script being idle again.
2. **app**: the real app (``streamlit_app.py``) trains ``--points`` steps with
   Play, then ``--clicks`` single Steps: the same two figures per Step (a Step
   reruns the whole page).

The renderer time is CPU time of the page's main thread, so it is steadier than
the wall time on a loaded machine; both are printed, medians over ``--rounds``.

Usage (from the repository root)::

    python -m benchmarks.bench_redraw [--rounds 3] [--points 100] [--clicks 20] [--only charts,app]
"""

from __future__ import annotations

import argparse
import re
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.common import (
    CHROMIUM,
    CHROMIUM_ARGS,
    POINTS_JS,
    AppServer,
    load_average,
    machine_info,
    playwright_or_exit,
    print_table,
    versions,
    wait_idle,
)

VIEWPORT = {"width": 1500, "height": 1400}
TIMEOUT_MS = 120_000

#: the charts page: ``ways`` picks how it draws them (query parameter ``way``)
CHARTS_PAGE = '''
import numpy as np
import streamlit as st

from explorer import linechart
from explorer.ui.common import svg_chart

POINTS = {points}
way = st.query_params.get("way", "svg_chart")
extra = st.session_state.setdefault("extra", 0)
if st.button("One more step", key="more"):
    st.session_state.extra = extra = extra + 1
n = POINTS + extra
steps = list(range(1, n + 1))
rng = np.random.default_rng(0)
losses = list(2.0 * np.exp(-np.arange(n) / 40) + 0.02 * rng.random(n))
acc = list(np.minimum(1.0, np.arange(n) / n + 0.1 * rng.random(n)))
charts = {{"t_loss": linechart.loss_chart(steps, losses, height=260),
          "t_acc": linechart.accuracy_chart(steps, acc, acc[::-1], acc, height=240)}}
st.write(f"steps drawn: {{n}}")
for key, svg in charts.items():
    with st.container(key=key):
        if way == "svg_chart":
            svg_chart(svg, key=f"{{key}}_svg")
        else:
            st.markdown(svg, unsafe_allow_html=True)
'''
WAYS = ("svg_chart", "markdown")


def renderer_ms(cdp) -> float:
    metrics = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
    return 1e3 * metrics["TaskDuration"]


def clicks(page, cdp, button: str, done_text, n: int) -> tuple[float, float]:
    """Click ``button`` ``n`` times, each time waiting for ``done_text(i)`` and
    the script to be idle; (renderer ms, median wall ms) per click."""
    page.wait_for_timeout(500)
    before, walls = renderer_ms(cdp), []
    for i in range(1, n + 1):
        start = time.perf_counter()
        page.locator(f".st-key-{button} button").click()
        page.get_by_text(done_text(i)).first.wait_for(timeout=TIMEOUT_MS)
        wait_idle(page, TIMEOUT_MS)
        walls.append(1e3 * (time.perf_counter() - start))
    page.wait_for_timeout(300)
    return (renderer_ms(cdp) - before) / n, statistics.median(walls)


def new_page(browser, url: str):
    context = browser.new_context(viewport=VIEWPORT)
    page = context.new_page()
    cdp = context.new_cdp_session(page)
    cdp.send("Performance.enable")
    page.goto(url, timeout=TIMEOUT_MS)
    return context, page, cdp


def charts_round(browser, server: AppServer, points: int, n: int) -> dict:
    out = {}
    for way in WAYS:
        context, page, cdp = new_page(browser, f"{server.url}/?way={way}")
        try:
            page.get_by_text(f"steps drawn: {points}").wait_for(timeout=TIMEOUT_MS)
            wait_idle(page, TIMEOUT_MS)
            for key in ("t_loss", "t_acc"):  # both drawn, whichever way
                page.locator(f".st-key-{key} svg").first.wait_for(timeout=TIMEOUT_MS)
            out[way] = clicks(page, cdp, "more",
                              lambda i: f"steps drawn: {points + i}", n)
        finally:
            context.close()
    return out


def app_round(browser, points: int, n: int) -> tuple[float, float]:
    server = AppServer(name="bench_redraw")
    try:
        server.wait_healthy()
        context, page, cdp = new_page(browser, server.url + "/")
        try:
            page.get_by_text(re.compile(r"Step 0 of \d+")).wait_for(timeout=TIMEOUT_MS)
            wait_idle(page, TIMEOUT_MS)
            epochs = page.locator(".st-key-m_epochs input")
            epochs.fill(str(points))
            epochs.press("Enter")
            page.get_by_text(f"Step 0 of {points}").wait_for(timeout=TIMEOUT_MS)
            wait_idle(page, TIMEOUT_MS)
            page.locator(".st-key-t_play button").click()
            page.get_by_text(f"Step {points} of {points}").wait_for(timeout=TIMEOUT_MS)
            wait_idle(page, TIMEOUT_MS)
            result = clicks(page, cdp, "t_step",
                            lambda i: re.compile(rf"Step {points + i} of \d+"), n)
            drawn = page.evaluate(f"({POINTS_JS})()")
            if drawn != points + n:
                raise RuntimeError(f"the loss chart shows {drawn} steps, not {points + n}")
            return result
        finally:
            context.close()
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--points", type=int, default=100,
                        help="steps already drawn before the timed redraws")
    parser.add_argument("--clicks", type=int, default=20, help="timed redraws per round")
    parser.add_argument("--only", default="charts,app", help="comma list: charts,app")
    args = parser.parse_args()
    parts = set(args.only.split(","))
    sync_playwright = playwright_or_exit()
    info = machine_info()
    print(f"machine: {info['cpu']}, {info['cores']} cores, {info['memory']}; "
          f"python {info['python']}; load average {load_average()}")
    vers = versions(["streamlit", "playwright", "jax", "flax"])
    charts, app = {w: [] for w in WAYS}, []
    with sync_playwright() as p, tempfile.TemporaryDirectory(prefix="bench_redraw_") as tmp:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        vers["chromium"] = browser.version
        print("versions: " + ", ".join(f"{k} {v}" for k, v in vers.items()), flush=True)
        page_file = Path(tmp) / "charts_page.py"
        page_file.write_text(CHARTS_PAGE.format(points=args.points), encoding="utf-8")
        server = AppServer(name="bench_redraw_charts", script=page_file) if (
            "charts" in parts) else None
        try:
            if server:
                server.wait_healthy()
            for r in range(1, args.rounds + 1):
                if server:
                    res = charts_round(browser, server, args.points, args.clicks)
                    for way, v in res.items():
                        charts[way].append(v)
                    print(f"  round {r} charts: " + ", ".join(
                        f"{w} {v[0]:.1f} ms renderer / {v[1]:.0f} ms wall"
                        for w, v in res.items()), flush=True)
                if "app" in parts:
                    app.append(app_round(browser, args.points, args.clicks))
                    print(f"  round {r} app Step: {app[-1][0]:.1f} ms renderer / "
                          f"{app[-1][1]:.0f} ms wall; load {load_average()}", flush=True)
        finally:
            if server:
                server.stop()
            browser.close()

    def med(rows, i):
        return statistics.median(r[i] for r in rows)

    if charts["svg_chart"]:
        print(f"\nThe train panel's two charts at {args.points}+ steps, per redraw (one "
              f"more step each; medians of {args.rounds} rounds of {args.clicks} clicks)")
        rows = [[w, f"{med(charts[w], 0):.1f}", f"{med(charts[w], 1):.0f}"] for w in WAYS]
        print_table(["drawn with", "renderer ms", "wall ms"], rows)
        ratio = statistics.median(a[0] / b[0] for a, b in
                                  zip(charts["svg_chart"], charts["markdown"]))
        print(f"renderer time svg_chart / markdown: {ratio:.2f} (median of the rounds' ratios; "
              "the page's own rerun is in both)")
    if app:
        print(f"\nThe app: one Step after {args.points} steps (a whole-page rerun), "
              f"medians of {args.rounds} rounds of {args.clicks} Steps")
        print_table(["renderer ms per Step", "wall ms per Step"],
                    [[f"{med(app, 0):.1f}", f"{med(app, 1):.0f}"]])
    print(f"\nload average now {load_average()}")


if __name__ == "__main__":
    main()

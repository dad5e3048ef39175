"""Issue 18's start-up targets in a real browser: how long a person waits for
the first page and for the first loss point.

Per round, with a fresh (empty) compilation cache directory:

1. a new server; session 1 opens the page: server process start -> first
   paint (every panel drawn: the title, the graph canvas, the model panel, the
   step counter and the Play button), and ready (Play enabled, i.e. the model
   built, and the script idle: the first session's model is built once the
   browser says the page is drawn); then Play -> first point in the loss chart
   (a cold compile);
2. session 2 on the same running server: page open -> first paint, and Play ->
   first point (the same shapes were compiled by session 1);
3. the server is stopped and started again on the same cache directory:
   session 3's first paint and Play -> first point (the compile is read from
   the persistent cache).

Targets: first paint <= 3 s (1) and <= 1.5 s (2); first point <= 1.5 s (1)
and <= 0.5 s (2, 3).

The peer, measured in the same round: a bare Streamlit page with only the
elements the paint waits for (``benchmarks/bare_page.py``), its server started
and its page opened the same way (bare 1: server start -> paint; bare 2: a
second session). The ratios paint/bare say how much of a paint is the app and
how much is Streamlit and the browser on this machine at that moment: this
machine's paints of the same code spread by 30 % within an hour.

``--think S``: seconds between the page being ready and the click on Play (a
person reading the page first; the app compiles the training step in the
background meanwhile). The default, 0, clicks at once: the worst case.

Usage (from the repository root)::

    python -m benchmarks.bench_start [--rounds N] [--mode nnx.jit] [--think S]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")

from benchmarks.common import (  # noqa: E402
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
TARGETS = {"paint 1": 3.0, "paint 2": 1.5, "point 1": 1.5, "point 2": 0.5, "point 3": 0.5}


BARE_PAGE = Path(__file__).with_name("bare_page.py")


def open_page(browser, url: str, t0: float) -> tuple:
    """A new tab on ``url``; returns (page, context, s to first paint, s to ready),
    both counted from ``t0``. The same elements on the app and on the bare page."""
    context = browser.new_context(viewport=VIEWPORT)
    page = context.new_page()
    page.goto(url + "/", timeout=TIMEOUT_MS)
    page.get_by_role("heading", name="GNN JIT Explorer").wait_for(timeout=TIMEOUT_MS)
    page.locator(".st-key-t_play button").wait_for(timeout=TIMEOUT_MS)
    page.get_by_text(re.compile(r"Step 0 of \d+")).wait_for(timeout=TIMEOUT_MS)
    page.locator(".st-key-g_canvas").first.wait_for(timeout=TIMEOUT_MS)
    page.locator(".st-key-m_epochs input").wait_for(timeout=TIMEOUT_MS)
    paint = time.perf_counter() - t0
    page.locator(".st-key-t_play button:enabled").wait_for(timeout=TIMEOUT_MS)
    wait_idle(page, TIMEOUT_MS)
    ready = time.perf_counter() - t0
    return page, context, paint, ready


def first_point(page, think_s: float = 0.0) -> float:
    page.locator(".st-key-t_play button").wait_for(timeout=TIMEOUT_MS)
    time.sleep(think_s)
    clicked = time.perf_counter()
    page.locator(".st-key-t_play button").click()
    page.wait_for_function(f"({POINTS_JS})() >= 1", timeout=TIMEOUT_MS, polling=10)
    took = time.perf_counter() - clicked
    wait_idle(page, TIMEOUT_MS)  # Play's 100 steps done
    return took


def visit(browser, url: str, t0: float, mode: str, out: dict, n: int, contexts: list,
          think_s: float = 0.0) -> None:
    """Session ``n``: open the page, choose ``mode``, Play ``think_s`` after the
    page is ready; its times go into ``out``."""
    page, context, out[f"paint {n}"], out[f"ready {n}"] = open_page(browser, url, t0)
    contexts.append(context)
    select_mode(page, mode)
    out[f"point {n}"] = first_point(page, think_s)


#: the servers of a round, in order: (page, the sessions opened on it); the app's
#: first server on an empty cache, then restarted on it; then the peer, whose
#: paints are "bare 1" and "bare 2"
SERVERS = (("app", (1, 2)), ("app", (3,)), ("bare", (1, 2)))


def one_round(browser, cache: str, mode: str, think_s: float = 0.0) -> dict:
    os.environ["EXPLORER_COMPILATION_CACHE"] = cache  # the servers below inherit it
    out, contexts = {}, []
    for page, sessions in SERVERS:
        server = (AppServer(name="bench_start") if page == "app" else
                  AppServer(name="bench_start_bare", script=BARE_PAGE))
        try:
            health = server.wait_healthy()
            if page == "app":
                out[f"health {sessions[0]}"] = health
            for n in sessions:  # the first from the server start, a later one from its open
                t0 = server.started if n == sessions[0] else time.perf_counter()
                if page == "app":
                    visit(browser, server.url, t0, mode, out, n, contexts, think_s)
                else:
                    _, context, out[f"bare {n}"], _ = open_page(browser, server.url, t0)
                    contexts.append(context)
        finally:
            while contexts:
                contexts.pop().close()
            server.stop()
    return out


def select_mode(page, mode: str) -> None:
    from explorer.config import RunConfig
    from explorer.engine import STEPPERS

    if mode != RunConfig().mode:
        page.locator(".st-key-t_mode").get_by_text(mode, exact=True).click()
        page.get_by_text(STEPPERS[mode].summary).wait_for(timeout=TIMEOUT_MS)
    wait_idle(page, TIMEOUT_MS)


COLUMNS = ["health 1", "paint 1", "ready 1", "point 1", "paint 2", "ready 2", "point 2",
           "health 3", "paint 3", "ready 3", "point 3", "bare 1", "bare 2"]
#: app paint -> the peer's paint it is compared with
PEERS = {"paint 1": "bare 1", "paint 2": "bare 2", "paint 3": "bare 1"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--mode", default="nnx.jit")
    parser.add_argument("--think", type=float, default=0.0,
                        help="seconds from the page being ready to the click on Play")
    args = parser.parse_args()
    sync_playwright = playwright_or_exit()
    info = machine_info()
    print(f"machine: {info['cpu']}, {info['cores']} cores, {info['memory']}; "
          f"python {info['python']}; load average {load_average()}")
    vers = versions(["streamlit", "playwright", "jax", "flax"])
    rows, results = [], []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        vers["chromium"] = browser.version
        print("versions: " + ", ".join(f"{k} {v}" for k, v in vers.items()), flush=True)
        try:
            for r in range(1, args.rounds + 1):
                with tempfile.TemporaryDirectory(prefix="bench_start_cache_") as cache:
                    res = one_round(browser, cache, args.mode, args.think)
                results.append(res)
                rows.append([r] + [f"{res[c]:.2f}" for c in COLUMNS])
                print(f"  round {r}: " + ", ".join(f"{c} {res[c]:.2f}" for c in COLUMNS)
                      + f"; load {load_average()}", flush=True)
        finally:
            browser.close()
    print(f"\nSeconds per round, mode {args.mode}, Play clicked {args.think:g} s after the page "
          "was ready (1: new server, empty compilation cache; "
          "2: a second session on it; 3: the server restarted on the same cache; "
          "paint/ready from the server start (1, 3) or the page open (2); point = Play -> "
          "first loss point; bare 1, bare 2: the bare page's paints, the same way)")
    print_table(["round"] + COLUMNS, rows)
    summary = []
    for key, target in TARGETS.items():
        med = statistics.median(r[key] for r in results)
        worst = max(r[key] for r in results)
        summary.append([key, f"{med:.2f}", f"{worst:.2f}", f"{target:.1f}",
                        "yes" if worst <= target else "no"])
    print(f"\nAgainst the targets ({args.rounds} rounds)")
    print_table(["what", "median s", "max s", "target s", "met (max)"], summary)
    ratios = [[key, f"{statistics.median(r[key] / r[peer] for r in results):.2f}",
               f"{max(r[key] / r[peer] for r in results):.2f}", peer]
              for key, peer in PEERS.items()]
    print("\nThe app's paint over the bare page's, same round (the peer)")
    print_table(["what", "median ratio", "max ratio", "over"], ratios)
    print(f"\nload average now {load_average()}")


if __name__ == "__main__":
    main()

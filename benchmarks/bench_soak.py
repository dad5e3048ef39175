"""Server memory across browser sessions: does a Reset, or a closed tab, give memory back?

The app server (``streamlit run streamlit_app.py``) is started here on a free
port of 127.0.0.1 and its resident memory (``VmRSS`` of its process and any
children, from ``/proc``) is sampled every 0.5 s throughout. Then:

1. one warm session opens the app, presses Play, waits for the first loss
   point and closes (the server's first session imports JAX and compiles);
2. ``--sessions`` browser sessions, one after the other, each a new Chromium
   context (a new Streamlit session and workspace) on the link: ``--cycles``
   times Play, train ``--seconds``, Reset (a new run replaces the old one), and
   then the tab is closed;
3. the server is left alone and its memory read ``--after`` seconds after the
   last tab closed.

Streamlit keeps a closed tab's session (its ``st.session_state``: here the
workspace and its run) for a reconnect: ``disconnect_session`` in
``streamlit/runtime/websocket_session_manager.py`` stores it in a
``MemorySessionStorage`` (a ``TTLCache``) for ``server.disconnectedSessionTTL``
seconds (default 120). Expired entries are only reaped when the cache is next
written (the next disconnect) and the session is not shut down, so a closed
tab's workspace lives at least that long; ``--session-ttl`` passes a shorter
TTL to the server, and ``--probe`` opens and closes one more tab at the end
(its disconnect reaps the expired sessions). Reset frees the old run at once
(the workspace holds its only reference); before the fix in
``explorer/engine.py`` every run was a reference cycle that waited for
Python's rare full collection (the app turns Streamlit's per-rerun
``gc.collect()`` off: ``explorer/ui/script.py``, ``RUNNER_OPTIONS``).

Every click is a ``page.mouse.click`` at the button's centre (``.st-key-t_play
button``, ``.st-key-t_reset button``). Nothing here downloads anything:
Chromium is ``/usr/bin/chromium`` (``$EXPLORER_CHROMIUM``).

Usage (from the repository root)::

    python -m benchmarks.bench_soak [--sessions N] [--cycles C] [--seconds S]
                                    [--after 10,30,60] [--session-ttl S] [--probe]
                                    [--link QUERY] [--json PATH]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import threading
import time
from pathlib import Path

from benchmarks.common import (
    CHROMIUM,
    CHROMIUM_ARGS,
    PAINT_MS,
    REPO,
    AppServer,
    machine_info,
    playwright_or_exit,
    print_table,
    versions,
)

# Cora with its word features (2,708 nodes, 1,433 features): a run that is worth
# freeing. Enough steps that a cycle never reaches the end.
LINK = ("graph=cora&features=file&layers=gcn-16,gcn-16&dropout=0.5&learning_rate=0.01"
        "&weight_decay=0.0005&optimizer=adam&activation=relu&epochs=5000&mode=nnx.jit")
SAMPLE_S = 0.5
POINT_MS = 120_000
ANSWER_MS = 60_000
POLL_MS = 50

PROGRESS_JS = """() => { for (const el of document.querySelectorAll('[data-testid="stProgress"]')) {
    const m = /Step (\\d+) of (\\d+)/.exec(el.innerText);
    if (m) return {step: Number(m[1]), training: /training/.test(el.innerText)}; }
    return null; }"""
READY_JS = """() => { const b = document.querySelector('.gc-box');
    const p = document.querySelector('.st-key-t_play button');
    return !!b && Number(b.dataset.nodes) > 0 && !!p && !p.disabled; }"""


# ----------------------------------------------------------------- memory
def _children(pid: int) -> list[int]:
    """Every descendant of ``pid`` (from ``/proc/*/stat``)."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        parents.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def rss_mb(pid: int) -> float | None:
    """Resident memory of ``pid`` and its descendants, MB (``None`` once it is gone)."""
    total, seen = 0, False
    for p in [pid, *_children(pid)]:
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
                    seen = True
                    break
        except OSError:
            continue
    return total / 1024 if seen else None


class Sampler(threading.Thread):
    """``(seconds since start, RSS MB, phase)`` every ``SAMPLE_S`` seconds."""

    def __init__(self, pid: int):
        super().__init__(daemon=True, name="rss-sampler")
        self.pid, self.start_t = pid, time.monotonic()
        self.phase = "start"
        self.samples: list[tuple[float, float, str]] = []
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.is_set():
            mb = rss_mb(self.pid)
            if mb is not None:
                self.samples.append((time.monotonic() - self.start_t, mb, self.phase))
            self.halt.wait(SAMPLE_S)

    def now(self) -> float:
        mb = rss_mb(self.pid)
        return mb if mb is not None else float("nan")

    def peak(self, phases=None) -> float:
        vals = [mb for _, mb, ph in self.samples if phases is None or ph in phases]
        return max(vals) if vals else float("nan")


# ---------------------------------------------------------------- session
class Session:
    """One browser tab on the link: Play, train, Reset, ``cycles`` times."""

    def __init__(self, browser, url: str, problems: list[str], name: str):
        from playwright.sync_api import TimeoutError as PlaywrightTimeout
        self.timeout_error = PlaywrightTimeout
        self.context = browser.new_context(viewport={"width": 1400, "height": 1000})
        self.page = self.context.new_page()
        self.problems, self.name = problems, name
        self.steps: list[int] = []
        self.page.goto(url, timeout=PAINT_MS, wait_until="commit")
        if not self.wait(READY_JS, timeout_ms=PAINT_MS):
            self.problem("no canvas and enabled Play")

    def problem(self, what: str) -> None:
        self.problems.append(f"{self.name}: {what}")

    def wait(self, js: str, timeout_ms: int = ANSWER_MS) -> bool:
        try:
            self.page.wait_for_function(js, timeout=timeout_ms, polling=POLL_MS)
            return True
        except self.timeout_error:
            return False

    def click(self, key: str) -> bool:
        # .first: while a rerun redraws the panel, the old button can still be there
        locator = self.page.locator(f".st-key-{key} button").first
        try:
            locator.scroll_into_view_if_needed(timeout=ANSWER_MS)
            box = locator.bounding_box(timeout=ANSWER_MS)
        except self.timeout_error:
            box = None
        if box is None:
            self.problem(f"no {key} button")
            return False
        self.page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        return True

    def step(self) -> int:
        p = self.page.evaluate(PROGRESS_JS)
        return p["step"] if p else -1

    def train(self, seconds: float) -> None:
        """Play, wait for the first loss point, train ``seconds``."""
        if not self.click("t_play"):
            return
        if not self.wait(f"() => {{ const p = ({PROGRESS_JS})(); "
                         "return !!p && p.step >= 1; }", timeout_ms=POINT_MS):
            self.problem("no loss point after Play")
            return
        time.sleep(seconds)

    def reset(self) -> None:
        self.steps.append(self.step())
        if self.click("t_reset") and not self.wait(
                f"() => {{ const p = ({PROGRESS_JS})(); return !!p && p.step === 0 "
                "&& !p.training; }"):
            self.problem("Reset did not go back to step 0")

    def close(self) -> None:
        self.page.close()
        self.context.close()


# ------------------------------------------------------------------- main
def fmt(mb: float) -> str:
    return f"{mb:,.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=4,
                        help="browser sessions after the warm one, one after the other "
                             "(default 4)")
    parser.add_argument("--cycles", type=int, default=3,
                        help="Play, train, Reset cycles per session (default 3)")
    parser.add_argument("--seconds", type=float, default=8.0,
                        help="training time per cycle after the first loss point "
                             "(default 8)")
    parser.add_argument("--after", default="10,30,60",
                        help="read RSS this many seconds after the last tab closed "
                             "(default 10,30,60)")
    parser.add_argument("--session-ttl", type=int, default=None,
                        help="pass --server.disconnectedSessionTTL (Streamlit's default: "
                             "120 s)")
    parser.add_argument("--probe", action="store_true",
                        help="after the last reading, open and close one more tab (its "
                             "disconnect reaps the stored sessions whose TTL is over) and "
                             "read RSS 10 s later")
    parser.add_argument("--link", default=LINK, help="the page's query string")
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = parser.parse_args()
    after = sorted(float(x) for x in args.after.split(",") if x.strip())
    sync_playwright = playwright_or_exit()

    info = machine_info()
    vers = versions(["streamlit", "playwright", "jax", "jaxlib", "flax"])
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO,
                            capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                           cwd=REPO, capture_output=True, text=True).stdout.strip()
    date = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
    print(f"date {date}; {REPO} at {commit}{' (modified)' if dirty else ''}")
    print(f"machine: {info['cpu']}, {info['cores']} cores, {info['memory']}; "
          f"python {info['python']}; " + ", ".join(f"{k} {v}" for k, v in vers.items()))
    extra = ([] if args.session_ttl is None
             else ["--server.disconnectedSessionTTL", str(args.session_ttl)])
    ttl = args.session_ttl if args.session_ttl is not None else 120
    print(f"{args.sessions} session(s) x {args.cycles} cycle(s) of Play, {args.seconds:g} s "
          f"of training, Reset; link ?{args.link}; disconnected sessions kept {ttl} s",
          flush=True)

    server = AppServer(extra, name="bench_soak")
    sampler = Sampler(server.proc.pid)
    figures: dict[str, float] = {}
    per_session: list[dict] = []
    problems: list[str] = []
    wall = time.monotonic()
    try:
        server.wait_healthy()
        sampler.start()
        time.sleep(1.0)
        figures["server idle"] = sampler.now()
        url = f"{server.url}/?{args.link}"
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            try:
                sampler.phase = "warm"
                warm = Session(browser, url, problems, "warm")
                warm.train(1.0)
                warm.close()
                time.sleep(3.0)
                figures["after the warm session"] = sampler.now()
                print(f"  server idle {fmt(figures['server idle'])} MB; after the warm "
                      f"session {fmt(figures['after the warm session'])} MB", flush=True)
                for n in range(1, args.sessions + 1):
                    sampler.phase = f"session {n}"
                    s = Session(browser, url, problems, f"session {n}")
                    after_cycle = []
                    for _ in range(args.cycles):
                        s.train(args.seconds)
                        s.reset()
                        time.sleep(1.0)
                        after_cycle.append(sampler.now())
                    s.close()
                    time.sleep(1.0)
                    row = {"session": n, "steps": s.steps, "after_resets_mb": after_cycle,
                           "closed_mb": sampler.now(),
                           "peak_mb": sampler.peak({f"session {n}"})}
                    per_session.append(row)
                    print(f"  session {n}: steps before each Reset {s.steps}; RSS after "
                          f"each Reset {[fmt(x) for x in after_cycle]} MB, after close "
                          f"{fmt(row['closed_mb'])} MB, peak {fmt(row['peak_mb'])} MB",
                          flush=True)
            finally:
                browser.close()
        sampler.phase = "closed"
        closed_at = time.monotonic()
        figures["all closed"] = sampler.now()
        for t in after:
            time.sleep(max(0.0, closed_at + t - time.monotonic()))
            figures[f"{t:g} s after"] = sampler.now()
            print(f"  {t:g} s after the last tab closed: {fmt(figures[f'{t:g} s after'])} MB",
                  flush=True)
        if args.probe:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
                try:
                    sampler.phase = "probe"
                    Session(browser, url, problems, "probe").close()
                finally:
                    browser.close()
            time.sleep(10.0)
            key = f"10 s after a probe tab ({time.monotonic() - closed_at:.0f} s after)"
            figures[key] = sampler.now()
            print(f"  {key}: {fmt(figures[key])} MB", flush=True)
    finally:
        sampler.halt.set()
        tracebacks = len(server.tracebacks())
        server.stop()
    figures["peak"] = sampler.peak()
    figures["peak while sessions ran"] = sampler.peak(
        {f"session {n}" for n in range(1, args.sessions + 1)})

    print()
    print_table(["server RSS", "MB"], [[k, fmt(v)] for k, v in figures.items()])
    if problems:
        print(f"\nproblems: {problems}")
    if tracebacks:
        print(f"server log: {tracebacks} traceback(s)")
    print(f"\ntotal wall time {time.monotonic() - wall:.0f} s")
    if args.json:
        args.json.write_text(json.dumps({
            "date": date, "commit": commit, "modified": bool(dirty), "machine": info,
            "versions": vers, "args": {k: str(v) for k, v in vars(args).items()},
            "session_ttl_s": ttl, "figures_mb": figures, "sessions": per_session,
            "samples": sampler.samples, "problems": problems,
            "server_tracebacks": tracebacks}, indent=1))
        print(f"results written to {args.json}")


if __name__ == "__main__":
    main()

"""Shared helpers for the benchmarks: the graphs, timing, table printing and
the app server the browser benchmarks start (``REPO``: the repository root,
where ``streamlit run streamlit_app.py`` runs).

Benchmark-only code; the library (``gnncore``) never imports it.
"""

from __future__ import annotations

import functools
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from explorer import linechart

REPO = Path(__file__).resolve().parents[1]
CORA_PATH = REPO.parent / "shared" / "datasets" / "cora.npz"


@dataclass
class GraphData:
    """One benchmark graph as host arrays (edges sorted by target, then source)."""

    name: str
    x: np.ndarray           # float32 [N, F]
    edge_index: np.ndarray  # int32 [2, E], sorted by (target, source)
    y: np.ndarray           # int32 [N]
    num_classes: int
    source: str             # where it came from, for the report

    @property
    def num_nodes(self) -> int:
        return self.x.shape[0]

    @property
    def num_edges(self) -> int:
        return self.edge_index.shape[1]

    @property
    def num_features(self) -> int:
        return self.x.shape[1]


def sort_by_target(edge_index: np.ndarray) -> np.ndarray:
    """The order ``gnncore.Graph.from_arrays`` uses: by target, then source."""
    order = np.lexsort((edge_index[0], edge_index[1]))
    return np.ascontiguousarray(edge_index[:, order]).astype(np.int32)


def random_graph(num_nodes: int, num_edges: int, num_features: int, num_classes: int,
                 *, seed: int = 0, name: str = "random") -> GraphData:
    """Uniform random directed edges (no self-loops; duplicates possible),
    standard-normal features, uniform labels. Seeded numpy, so every framework
    gets the same graph."""
    rng = np.random.default_rng(seed)
    src = rng.integers(0, num_nodes, num_edges)
    # A shift in [1, N) keeps the target different from the source.
    dst = (src + rng.integers(1, num_nodes, num_edges)) % num_nodes
    edge_index = sort_by_target(np.stack([src, dst]))
    x = rng.standard_normal((num_nodes, num_features), dtype=np.float32)
    y = rng.integers(0, num_classes, num_nodes).astype(np.int32)
    return GraphData(name, x, edge_index, y, num_classes,
                     f"random (seed {seed})")


def load_cora(path: Path = CORA_PATH, *, seed: int = 1) -> GraphData:
    """The real Cora graph when ``../shared/datasets/cora.npz`` exists, else a
    random graph of the same shape (2708 nodes, 10556 edges, 1433 features,
    7 classes)."""
    if path.exists():
        with np.load(path, allow_pickle=False) as d:
            ei = np.asarray(d["edge_index"], dtype=np.int64)
            if bool(d["undirected"]):
                ei = np.concatenate([ei, ei[::-1]], axis=1)
            x = np.asarray(d["x"], dtype=np.float32)
            y = np.asarray(d["y"], dtype=np.int32)
        if (y < 0).any():  # all Cora nodes are labelled; guard anyway
            y = np.where(y < 0, 0, y).astype(np.int32)
        return GraphData("cora", x, sort_by_target(ei), y, int(y.max()) + 1,
                         f"real Cora ({path.name})")
    g = random_graph(2708, 10556, 1433, 7, seed=seed, name="cora")
    g.source = f"random graph of Cora's shape (seed {seed}; {path} not found)"
    return g


def shapes(names: list[str]) -> list[GraphData]:
    out = []
    for n in names:
        if n == "random":
            out.append(random_graph(10_000, 100_000, 128, 16, seed=0))
        elif n == "cora":
            out.append(load_cora())
        else:
            raise SystemExit(f"unknown shape {n!r}; choose from random, cora")
    return out


def fmt(v, spec: str) -> str:
    """``v`` formatted with ``spec``, or "-" for None (a cell a row does not have)."""
    return "-" if v is None else format(v, spec)


def load_average() -> str:
    """1/5/15-minute load average: other processes share this machine."""
    try:
        return " ".join(f"{v:.2f}" for v in os.getloadavg())
    except OSError:
        return "?"


def median_ms(times_s: list[float]) -> float:
    return 1e3 * statistics.median(times_s)


def timeit(fn, sync, *, steps: int, warmup: int) -> list[float]:
    """Call ``fn`` ``warmup`` times, then time ``steps`` calls one by one
    (each followed by ``sync`` on its result). Returns seconds per call."""
    for _ in range(warmup):
        sync(fn())
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        sync(fn())
        times.append(time.perf_counter() - t0)
    return times


def rss_bytes() -> int:
    """This process's resident set size (``/proc/self/statm``; 0 where unreadable)."""
    try:
        return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def rss_peak_delta(fn, *, interval_s: float = 0.0005):
    """Call ``fn()`` while a thread samples the RSS every ``interval_s``:
    ``(result, peak RSS during the call - RSS just before it)`` in bytes.

    A lower bound of what the call allocates: memory that the allocator kept
    from earlier calls (glibc keeps freed blocks under its mmap threshold, up
    to 32 MiB each) is reused without growing the RSS, and a peak shorter than
    the sampling interval can be missed. It works for any framework on CPU
    (torch's CPU allocator keeps no statistics); on a GPU it sees host memory only.
    """
    import threading

    before, peak, done = rss_bytes(), [0], threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], rss_bytes())
            time.sleep(interval_s)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        result = fn()
    finally:
        done.set()
        thread.join()
    peak[0] = max(peak[0], rss_bytes())
    return result, max(peak[0] - before, 0)


def print_table(headers: list[str], rows: list[list], *, title: str | None = None) -> None:
    cells = [[str(c) for c in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h)
              for i, h in enumerate(headers)]
    if title:
        print(f"\n{title}")
    print("| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in cells:
        print("| " + " | ".join(c.rjust(w) if _numeric(c) else c.ljust(w)
                                for c, w in zip(r, widths)) + " |")


def _numeric(s: str) -> bool:
    try:
        float(s.rstrip("x"))
        return True
    except ValueError:
        return False


def machine_info() -> dict[str, str]:
    model = platform.processor() or "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = "?"
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem = f"{int(line.split()[1]) / 2**20:.1f} GiB"
                break
    except OSError:
        pass
    return {"cpu": model, "cores": str(os.cpu_count()), "memory": mem,
            "python": platform.python_version()}


def versions(mods: list[str]) -> dict[str, str]:
    import importlib.metadata as md
    out = {}
    for m in mods:
        try:
            out[m] = md.version(m)
        except md.PackageNotFoundError:
            out[m] = "not installed"
    return out


# ------------------------------------------------------------- app server
# How many steps the train panel's loss chart draws (explorer/linechart.py: an
# SVG whose aria-label is its title and whose data-points is its step count).
POINTS_JS = f"""() => {{
    const svg = document.querySelector('svg.{linechart.CSS_CLASS}[aria-label="Training loss"]');
    return svg ? Number(svg.dataset.points) : 0;
}}"""


def wait_idle(page, timeout_ms: int = 120_000) -> None:
    """Wait until the app's script has finished its run (Streamlit's own flag)."""
    page.wait_for_selector('[data-testid="stApp"][data-test-script-state="notRunning"]',
                           timeout=timeout_ms)

#: Debian's Chromium (never a downloaded browser) and the flags that work here;
#: the browser tests (tests/app/test_browser.py) use the same.
CHROMIUM = Path(os.environ.get("EXPLORER_CHROMIUM", "/usr/bin/chromium"))

#: The features Playwright (1.65, requirements-test.txt) turns off with its own
#: ``--disable-features`` (``chromiumSwitches.ts`` in its driver). Chromium keeps
#: only the last ``--disable-features`` of its command line, so the one in
#: :data:`CHROMIUM_ARGS`, which comes after Playwright's, repeats them
#: (tests/app/test_browser.py checks that it still holds all of Playwright's).
PLAYWRIGHT_DISABLED_FEATURES = (
    "AvoidUnnecessaryBeforeUnloadCheckSync", "DestroyProfileOnBrowserClose", "HttpsUpgrades",
    "HttpsFirstBalancedModeAutoEnable", "LensOverlay", "MediaRouter", "PaintHolding",
    "ThirdPartyStoragePartitioning", "AvoidCorsURLLoaderRestartOnRedirect",
    "TcpPortRandomizationWin", "OptimizationHints", "NetworkTimeServiceQuerying", "AimEnabled",
    "PreconnectToSearch", "msForceBrowserSignIn", "msEdgeUpdateLaunchServicesPreferredVersion")

#: Headless Chromium 156 opens each browser context (each test's or benchmark's
#: new session) in a window of its own, and each window's omnibox popup is a
#: WebUI page with a renderer process of its own: about 1 CPU-s a page load
#: (4.74 -> 3.67 CPU-s; benchmarks/RESULTS.md) for a popup nobody opens. A user's
#: own browser has it open once, not once per tab.
OMNIBOX_POPUP_FEATURES = ("WebUIOmniboxPopup", "WebUIOmniboxAimPopup", "WebUIOmniboxFullPopup")

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync",
                 "--disable-features="
                 + ",".join(PLAYWRIGHT_DISABLED_FEATURES + OMNIBOX_POPUP_FEATURES)]


#: how long the app server may take to answer its health check, and a page its
#: first paint (the server's first session imports JAX and the app: slow under load)
HEALTH_TIMEOUT_S = 90
PAINT_MS = 240_000


def playwright_or_exit():
    """``sync_playwright``, or exit with a message when Playwright or the
    browser is missing."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        raise SystemExit("playwright is not installed") from None
    if not CHROMIUM.exists():
        raise SystemExit(f"no Chromium at {CHROMIUM} (set EXPLORER_CHROMIUM)")
    return sync_playwright


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@functools.cache
def byte_compile_app() -> None:
    """Write the byte code of the app's own modules (``explorer``, ``gnncore``)
    where it is missing or stale, as Python does on a user's machine the first
    time it imports them, so that a server start measured here reads it as a
    user's later starts do. Under ``PYTHONDONTWRITEBYTECODE`` (set on this
    project's machines) nothing wrote it, and every server start compiled those
    modules from source again: 88 of them, 0.11 s of a new server's first page."""
    import compileall

    for package in ("explorer", "gnncore"):
        compileall.compile_dir(REPO / package, quiet=1)


class AppServer:
    """``streamlit run streamlit_app.py`` (plus ``options``) on a free port of
    127.0.0.1, as users run it (the app's byte code written first:
    :func:`byte_compile_app`); its log goes to a temporary file (its tail is
    printed if it fails). ``started`` is the ``perf_counter`` time just before
    the process was created. ``script``: another page to serve (a benchmark's
    own), run from the repository root with the repository importable."""

    def __init__(self, options: list[str] = (), *, name: str = "bench",
                 script: str | Path = "streamlit_app.py"):
        byte_compile_app()
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        fd, path = tempfile.mkstemp(prefix=f"{name}_", suffix=".log")
        os.close(fd)
        self.log = Path(path)
        cmd = [sys.executable, "-m", "streamlit", "run", str(script),
               "--server.headless", "true", "--server.address", "127.0.0.1",
               "--server.port", str(self.port), "--browser.gatherUsageStats", "false",
               "--server.fileWatcherType", "none", *options]
        env = dict(os.environ, JAX_PLATFORMS="cpu")
        env.pop("JAX_DISABLE_MOST_OPTIMIZATIONS", None)  # the app as users run it
        if str(script) != "streamlit_app.py":
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO),
                                                              env.get("PYTHONPATH")]))
        with open(self.log, "w") as out:
            self.started = time.perf_counter()
            self.proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=out,
                                         stderr=subprocess.STDOUT)

    def wait_healthy(self, timeout_s: float = HEALTH_TIMEOUT_S) -> float:
        """Seconds from the process start to ``/_stcore/health`` saying ok."""
        deadline = time.monotonic() + timeout_s
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"streamlit exited with {self.proc.returncode}:\n"
                                   f"{self.tail()}")
            try:
                with urllib.request.urlopen(f"{self.url}/_stcore/health", timeout=2) as r:
                    if r.read().decode().strip() == "ok":
                        return time.perf_counter() - self.started
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"streamlit not healthy after {timeout_s} s:\n{self.tail()}")
            time.sleep(0.05)

    def tail(self, chars: int = 3000) -> str:
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except OSError:
            return "(no log)"

    def tracebacks(self) -> list[str]:
        """Every traceback in the server log (exceptions the app logged, e.g. a
        panel that hit an error), whole, up to its exception line."""
        try:
            lines = self.log.read_text(errors="replace").splitlines()
        except OSError:
            return []
        found = []
        for i, line in enumerate(lines):
            if line.startswith("Traceback"):
                for j, later in enumerate(lines[i + 1:], i + 1):
                    if later and not later.startswith((" ", "Traceback")):
                        found.append("\n".join(lines[i:j + 1])[-6000:])
                        break
        return found

    def stop(self) -> None:
        """Stop the server by its PID (terminate, then kill), and drop the log."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=15)
        self.log.unlink(missing_ok=True)

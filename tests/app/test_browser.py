"""The Streamlit app in a real browser (headless Chromium through Playwright).

One ``streamlit run`` server and one browser for the module; every test opens
its own browser context, i.e. its own Streamlit session and workspace.

Skipped when Playwright or ``/usr/bin/chromium`` (``$EXPLORER_CHROMIUM``) is
missing, unless the ``CI`` environment variable is set: then a missing browser
is a failure, so that CI really runs these tests.

Screenshots of every panel go to ``$TEST_ARTIFACTS`` (default
``tests/artifacts``).
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest
from conftest import REPO, app_environ

from benchmarks.common import CHROMIUM, CHROMIUM_ARGS
from explorer import linechart
from explorer.engine import STEPPERS
from explorer.ui.common import DRAWN_KEY

try:
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import expect, sync_playwright
except ImportError:  # pragma: no cover - depends on the machine
    sync_playwright = None

ARTIFACTS = Path(os.environ.get("TEST_ARTIFACTS", REPO / "tests" / "artifacts"))
VIEWPORT = {"width": 1500, "height": 2600}  # tall: every panel fits without scrolling

START_TIMEOUT_S = 60  # server process start -> /_stcore/health says "ok"
LOAD_MS = 90_000  # first page load: imports JAX and builds the first model
COMPILE_MS = 90_000  # a step that traces and compiles (seconds; slow under load)
STEP_MS = 60_000  # any other rerun

STEP_TEXT = re.compile(r"Step (\d+) of (\d+)")

# The train panel's SVG chart titled ``title`` (explorer/linechart.py): how many
# steps it draws (0 when it is missing or empty).
_POINTS_JS = f"""(title) => {{
    for (const svg of document.querySelectorAll('svg.{linechart.CSS_CLASS}')) {{
        if (svg.getAttribute('aria-label') === title) return Number(svg.dataset.points);
    }}
    return 0;
}}"""


def _browser_missing() -> str:
    if sync_playwright is None:
        return "playwright is not installed"
    if not CHROMIUM.exists():
        return f"no Chromium at {CHROMIUM}"
    return ""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _log_tail(path: Path, chars: int = 3000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return "(no log)"


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=15)


class App:
    """The running server and the browser."""

    def __init__(self, url: str, browser, runs: Path):
        self.url = url
        self.browser = browser
        #: sessions opened so far with :meth:`session` (0: the server's first is to come)
        self.sessions = 0
        #: the app's "Your runs" folder (EXPLORER_RUNS), which a test writes a run into
        self.runs = runs

    def session(self, query: str = "", viewport: dict | None = None, **options):
        """A fresh browser context (a new Streamlit session) on the app's page
        plus ``query`` (e.g. ``?graph=house``), loaded: returns ``(context, page)``.
        ``options``: more of the context's (``has_touch=True``: a touch screen)."""
        context = self.browser.new_context(viewport=viewport or VIEWPORT, **options)
        page = context.new_page()
        self.sessions += 1
        page.goto(self.url + query, timeout=LOAD_MS)
        expect(progress(page), "the page never showed its step counter").to_contain_text(
            STEP_TEXT, timeout=LOAD_MS)
        return context, page


@contextlib.contextmanager
def serve(*, as_users_run_it: bool = False, **env_extra):
    """``streamlit run streamlit_app.py`` on a free port of 127.0.0.1 (with
    ``env_extra`` in its environment; the test session's compile settings unless
    ``as_users_run_it``: see ``conftest.app_environ``) and a headless Chromium:
    yields an :class:`App`; stops both."""
    missing = _browser_missing()
    if missing:
        if os.environ.get("CI"):
            pytest.fail(f"{missing}: the browser tests must run in CI")
        pytest.skip(missing)
    with server(as_users_run_it=as_users_run_it, **env_extra) as (url, runs):
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            try:
                yield App(url, browser, runs)
            finally:
                browser.close()


@contextlib.contextmanager
def server(*, as_users_run_it: bool = False, **env_extra):
    """The app server of :func:`serve` alone: yields ``(url, runs folder)``; stops it."""
    port = _free_port()
    log = Path(tempfile.mkstemp(prefix="streamlit_", suffix=".log")[1])
    runs = tempfile.TemporaryDirectory(prefix="explorer_runs_")
    env = app_environ(as_users_run_it=as_users_run_it, JAX_PLATFORMS="cpu",
                      EXPLORER_RUNS=runs.name, **env_extra)
    cmd = [sys.executable, "-m", "streamlit", "run", "streamlit_app.py",
           "--server.headless", "true", "--server.address", "127.0.0.1",
           "--server.port", str(port), "--browser.gatherUsageStats", "false",
           "--server.fileWatcherType", "none"]
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                pytest.fail(f"streamlit exited with {proc.returncode}:\n{_log_tail(log)}")
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                    if r.read().decode().strip() == "ok":
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"streamlit not healthy after {START_TIMEOUT_S} s:\n"
                            f"{_log_tail(log)}")
            time.sleep(0.2)
        yield url + "/", Path(runs.name)
    finally:
        _stop(proc)
        if proc.returncode not in (0, -15, None):
            print(f"streamlit log:\n{_log_tail(log)}")
        log.unlink(missing_ok=True)
        runs.cleanup()


@pytest.fixture(scope="module")
def app():
    with serve() as running:
        yield running


# ------------------------------------------------------------------ helpers
def progress(page):
    """The train panel's progress bar ("Step N of M")."""
    return page.locator('[data-testid="stProgress"]').filter(has_text=STEP_TEXT)


def steps_done(page) -> int:
    text = progress(page).first.inner_text(timeout=STEP_MS)
    match = STEP_TEXT.search(text)
    assert match, f"no 'Step N of M' in the progress bar text {text!r}"
    return int(match.group(1))


def metric(page, label: str) -> str:
    """The value of the metric labelled ``label`` (Loss, Train acc, ...)."""
    box = page.locator('[data-testid="stMetric"]').filter(has_text=label).first
    return box.locator('[data-testid="stMetricValue"]').inner_text(timeout=STEP_MS)


def expect_steps(page, n: int, timeout: int = STEP_MS) -> None:
    expect(progress(page), f"the step counter never showed 'Step {n} of'").to_contain_text(
        re.compile(rf"Step {n} of \d+"), timeout=timeout)


def click(page, key: str) -> None:
    """Click the button whose widget key is ``key`` (Streamlit's ``st-key-*`` class).
    A button with a help tooltip is in the page twice, one copy hidden (Streamlit
    1.67 measures its width with it): click the visible one."""
    button = page.locator(f".st-key-{key} button:visible")
    expect(button, f"the {key} button is not on the page exactly once").to_have_count(
        1, timeout=STEP_MS)
    button.click(timeout=STEP_MS)


def press_step(page, times: int) -> int:
    """Press Step ``times`` times, each time waiting for the counter to advance."""
    n = steps_done(page)
    for _ in range(times):
        click(page, "t_step")
        n += 1
        expect_steps(page, n, COMPILE_MS if n == 1 else STEP_MS)
    return n


def set_number(page, key: str, value: int) -> None:
    field = page.locator(f".st-key-{key} input")
    field.fill(str(value))
    field.press("Enter")
    expect(field, f"the {key} number input did not take {value}").to_have_value(str(value))


def choose_mode(page, mode: str) -> None:
    radio = page.locator(".st-key-t_mode").get_by_role("radio", name=mode, exact=True)
    page.locator(".st-key-t_mode").get_by_text(mode, exact=True).click()
    expect(radio, f"the JIT mode radio did not select {mode}").to_be_checked(timeout=STEP_MS)
    # The server has switched once the panel shows the mode's one-line lesson.
    expect(column(page, "Train"), f"the train panel never switched to {mode}").to_contain_text(
        STEPPERS[mode].summary, timeout=STEP_MS)
    expect_steps(page, 0)  # a new mode starts a new run


# True once the page's script state has read "notRunning" for ``quiet`` ms on
# end. A run that ends in st.rerun() (the canvas's fragment does, after an
# edit) reports "notRunning" for a moment before the next run starts: a single
# read can fall into that gap and see the page before the rerun redrew it.
_IDLE_JS = """(quiet) => {
    const app = document.querySelector('[data-testid="stApp"]');
    const state = app ? app.getAttribute('data-test-script-state') : null;
    const now = performance.now(), w = globalThis;
    if (w.__idleState !== state) { w.__idleState = state; w.__idleSince = now; }
    return state === 'notRunning' && now - w.__idleSince >= quiet;
}"""


def wait_idle(page, timeout: int = STEP_MS, quiet_ms: int = 300) -> None:
    """Wait until no script runs, and none has started for ``quiet_ms``."""
    expect(page.locator('[data-testid="stApp"]'),
           "the script kept running").to_have_attribute(
        "data-test-script-state", "notRunning", timeout=timeout)
    page.evaluate("globalThis.__idleState = undefined")  # measure the quiet from now
    page.wait_for_function(_IDLE_JS, arg=quiet_ms, polling=50, timeout=timeout)


def loss_points(page) -> int:
    return page.evaluate(_POINTS_JS, "Training loss")


def column(page, heading: str):
    """The page column that holds the panel headed ``heading``."""
    return page.locator('[data-testid="stColumn"]').filter(
        has=page.get_by_role("heading", name=heading, exact=True))


def shoot(locator, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / name
    locator.screenshot(path=str(path), timeout=STEP_MS, animations="disabled")
    return path


# -------------------------------------------------------------------- tests
def test_a_new_servers_first_model_is_built_once_the_browser_says_its_page_is_drawn(app):
    """The server's first session draws its whole page before it builds the
    model, and builds it when the browser reports that page drawn (the
    ``page_drawn`` component's trigger, explorer/ui/common.py): while the test
    holds that message back, Play stays disabled under "Building the model";
    once it is let through, Play comes on with no click."""
    if app.sessions:  # run after another test of this file: a new server of its own
        with server() as (url, runs):
            _first_model_waits_for_the_drawn_signal(App(url, app.browser, runs))
    else:
        _first_model_waits_for_the_drawn_signal(app)


def _first_model_waits_for_the_drawn_signal(app) -> None:
    held, link = [], {"server": None, "released": False}
    signal = DRAWN_KEY.encode()  # the component's key, in the message its trigger sends

    def route(ws):
        link["server"] = ws.connect_to_server()

        def from_page(message):
            if isinstance(message, bytes) and signal in message and not link["released"]:
                held.append(message)  # the browser's "drawn": held until the test says
            else:
                link["server"].send(message)

        ws.on_message(from_page)

    context = app.browser.new_context(viewport=VIEWPORT)
    try:
        page = context.new_page()
        page.route_web_socket(re.compile(r"/_stcore/stream"), route)
        app.sessions += 1
        page.goto(app.url, timeout=LOAD_MS)
        train = column(page, "Train")
        expect(train).to_contain_text("Building the model now that the page is drawn",
                                      timeout=LOAD_MS)
        expect(progress(page)).to_contain_text("Step 0 of 100")
        expect(page.locator(".st-key-g_canvas .gc-box")).to_have_attribute(
            "data-nodes", "34", timeout=STEP_MS)  # the canvas drew the graph
        deadline = time.monotonic() + 20
        while not held and time.monotonic() < deadline:
            page.wait_for_timeout(100)
        assert held, "the browser never said that the page was drawn"
        page.wait_for_timeout(1000)  # the server waits: no model without the message
        expect(page.locator(".st-key-t_play button")).to_be_disabled()
        expect(train).to_contain_text("Building the model now that the page is drawn")
        link["released"] = True
        for message in held:
            link["server"].send(message)
        expect(page.locator(".st-key-t_play button")).to_be_enabled(timeout=COMPILE_MS)
        expect(train).not_to_contain_text("Building the model", timeout=STEP_MS)
    finally:
        context.close()


def test_play_draws_the_loss_chart_and_pause_stops(app):
    context, page = app.session()
    try:
        set_number(page, "m_epochs", 20000)  # long enough not to finish by itself
        expect(progress(page), "Steps per Play did not reach the run").to_contain_text(
            "Step 0 of 20000", timeout=STEP_MS)
        click(page, "t_play")
        try:
            page.wait_for_function(f"({_POINTS_JS})('Training loss') >= 2",
                                   timeout=COMPILE_MS, polling=250)
        except PlaywrightError:
            pytest.fail(f"after Play the loss chart has {loss_points(page)} point(s) "
                        f"(want >= 2); progress: {progress(page).first.inner_text()!r}")
        click(page, "t_pause")
        expect(progress(page), "still 'training…' after Pause").not_to_contain_text(
            "training", timeout=STEP_MS)
        wait_idle(page)
        before = steps_done(page)
        assert 2 <= before < 20000, f"after Pause the counter shows {before} steps"
        page.wait_for_timeout(2000)
        after = steps_done(page)
        assert after == before, f"training went on after Pause: {before} -> {after} steps"
        # One Step redraws the whole page at rest: chart and counter must agree.
        n = press_step(page, 1)
        wait_idle(page)
        assert n == after + 1
        assert loss_points(page) == n, "the loss chart and the counter disagree"
        # Pointing at the curve's right end shows that step's loss (the band under
        # the pointer carries it as its tooltip).
        chart = page.locator(f".st-key-t_loss svg.{linechart.CSS_CLASS}")
        box = chart.bounding_box()
        scale = box["width"] / linechart.WIDTH
        x = box["x"] + (linechart.WIDTH - linechart.RIGHT - 1) * scale
        y = box["y"] + box["height"] / 2
        page.mouse.move(x, y)
        tip, shade = page.evaluate(
            "([x, y]) => { const e = document.elementFromPoint(x, y);"
            " const t = e && e.querySelector('title');"
            " return [t ? t.textContent : (e ? e.outerHTML.slice(0, 80) : null),"
            " e ? getComputedStyle(e).fillOpacity : null]; }", [x, y])
        assert shade == "0.08", f"the band under the pointer is not shaded ({shade})"
        loss = metric(page, "Loss")
        shown = re.fullmatch(rf"step {n}: loss ([-+.e\d]+)", tip or "")
        assert shown and abs(float(shown[1]) - float(loss)) < 1e-3, (tip, loss)
    finally:
        context.close()


def test_jax_jit_freezes_and_nnx_jit_trains(app):
    context, page = app.session()
    train = column(page, "Train")
    try:
        choose_mode(page, "jax.jit")
        press_step(page, 2)
        expect(train, "jax.jit after 2 steps: no FROZEN verdict").to_contain_text(
            "FROZEN", timeout=STEP_MS)
        expect(train, "jax.jit after 2 steps: TRAINING shown").not_to_contain_text("TRAINING")

        choose_mode(page, "nnx.jit")
        expect(train, "a FROZEN verdict outlived the new run").not_to_contain_text("FROZEN")
        press_step(page, 2)
        expect(train, "nnx.jit after 2 steps: no TRAINING verdict").to_contain_text(
            "TRAINING", timeout=STEP_MS)
        expect(train, "nnx.jit after 2 steps: FROZEN shown").not_to_contain_text("FROZEN")
    finally:
        context.close()


def test_two_sessions_have_separate_runs(app):
    context_a, a = app.session()
    context_b = None
    try:
        press_step(a, 3)
        context_b, b = app.session()
        assert steps_done(b) == 0, f"a new session B shows A's steps: {steps_done(b)}"
        click(b, "t_step")
        expect(progress(b), "B's first step did not count from 0").to_contain_text(
            re.compile(r"Step 1 of \d+"), timeout=COMPILE_MS)
        assert steps_done(a) == 3, "A's counter moved when B stepped"
        click(a, "t_step")  # a rerun of A: its workspace still holds exactly 3 steps
        expect(progress(a), "A's run was changed by B").to_contain_text(
            re.compile(r"Step 4 of \d+"), timeout=STEP_MS)
        assert steps_done(b) == 1, "B's counter moved when A stepped"
    finally:
        if context_b is not None:
            context_b.close()
        context_a.close()


def test_screenshots_of_every_panel(app):
    context, page = app.session()
    shots = []
    try:
        press_step(page, 3)
        wait_idle(page)
        graph, train = column(page, "Graph"), column(page, "Train")
        expect(graph.locator(".gc-box canvas").first).to_be_visible()
        shots.append(shoot(graph, "panel_graph.png"))
        expect(train.locator(f".st-key-t_loss svg.{linechart.CSS_CLASS}")).to_be_visible()
        shots.append(shoot(train, "panel_train.png"))
        shots.append(shoot(page.locator('[data-testid="stSidebar"]'), "panel_model.png"))

        tabs = page.locator('[data-testid="stTabs"]')
        for name, file, ready in (
                ("Verdict & audit", "diagnose_audit.png", '[data-testid="stDataFrame"]'),
                ("Parameter changes", "diagnose_changes.png", ".st-key-d_heatmap .js-plotly-plot"),
                ("Compile vs run", "diagnose_compile.png", None),
                ("Race", "diagnose_race.png", None)):
            tabs.get_by_role("tab", name=name, exact=True).click()
            panel = tabs.get_by_role("tabpanel", name=name)
            if name == "Compile vs run":
                click(page, "d_measure")
                ready = ".st-key-d_timing .js-plotly-plot"
            elif name == "Race":
                set_number(page, "d_steps", 5)
                wait_idle(page)
                click(page, "d_race")
                ready = ".st-key-d_race_chart .js-plotly-plot"
            expect(panel.locator(ready).first, f"the {name} tab never drew").to_be_visible(
                timeout=COMPILE_MS)
            if name == "Race":
                expect(panel, "the race did not find jax.jit frozen").to_contain_text(
                    "Frozen: jax.jit", timeout=STEP_MS)
            wait_idle(page)
            shots.append(shoot(tabs, file))
        shots.append(shoot(page.locator('[data-testid="stApp"]'), "app_full.png"))
    finally:
        context.close()
    for path in shots:
        assert path.exists(), f"no screenshot {path}"
        size = path.stat().st_size
        assert size > 10_000, f"{path.name} is only {size} bytes: a blank panel?"


def test_the_address_bar_shares_the_run(app):
    context_a, a = app.session()
    context_b = None
    try:
        choose_mode(a, "jax.jit")
        press_step(a, 2)
        url = a.url
        assert "mode=jax.jit" in url, f"the address bar does not hold the mode: {url}"
        context_b = app.browser.new_context(viewport=VIEWPORT)
        b = context_b.new_page()
        b.goto(url + "&classroom=1")
        expect(progress(b), "the shared link did not load").to_contain_text(
            re.compile(r"Step 0 of \d+"), timeout=LOAD_MS)
        press_step(b, 2)  # the link's mode is jax.jit: the banner must say FROZEN
        expect(b.get_by_text("FROZEN").first).to_be_visible(timeout=STEP_MS)
        assert b.get_by_text("Classroom link").count() == 1, "classroom flag not applied"
        assert b.locator(".st-key-m_add_layer").count() == 0, "model panel shown in class"
    finally:
        if context_b is not None:
            context_b.close()
        context_a.close()


def test_a_link_opens_a_lesson_and_the_fix_goes_side_by_side(app):
    context = app.browser.new_context(viewport=VIEWPORT)
    try:
        page = context.new_page()
        page.goto(app.url + "?lesson=frozen-params&classroom=1", timeout=LOAD_MS)
        card = page.locator(".st-key-l_card")
        expect(card, "the lesson from the link never opened").to_contain_text(
            "Lesson 1: jax.jit around a mutating step", timeout=LOAD_MS)
        expect(card.get_by_text("FROZEN — jax.jit (the pitfall)")).to_be_visible(
            timeout=COMPILE_MS)
        # The lesson trained the explorer's own run: its chart and banner agree.
        expect(progress(page)).to_contain_text("Step 10 of", timeout=STEP_MS)
        expect(column(page, "Train").get_by_text("FROZEN").first).to_be_visible()
        click(page, "l_fix")
        expect(card.get_by_text("TRAINING — nnx.jit (the fix)")).to_be_visible(
            timeout=COMPILE_MS)
        expect(card.get_by_text("FROZEN — jax.jit (the pitfall)")).to_be_visible()
        expect(column(page, "Train").get_by_text("TRAINING").first).to_be_visible(
            timeout=STEP_MS)
        assert "lesson=frozen-params" in page.url, page.url
        wait_idle(page)
        size = shoot(card, "lesson_side_by_side.png").stat().st_size
        assert size > 10_000, f"the lesson screenshot is only {size} bytes"
        # "Download as script" writes the script of the run on show (the fix's).
        with page.expect_download(timeout=STEP_MS) as download:
            page.locator(".st-key-t_export").get_by_role(
                "button", name="Download as script").click(timeout=STEP_MS)
        script = Path(download.value.path()).read_text()
        assert download.value.suggested_filename == "gnn_karate_nnx_jit.py"
        assert 'MODE = "nnx.jit"' in script and "from gnncore import" in script
    finally:
        context.close()


_WRITER = """
import time, jax.numpy as jnp, optax, explorer
from flax import nnx
model = nnx.Linear(3, 1, rngs=nnx.Rngs(0))
optimizer = nnx.Optimizer(model, optax.sgd(0.05), wrt=nnx.Param)
x, y = jnp.ones((8, 3)), jnp.zeros((8, 1))

@nnx.jit
def train_step(model, optimizer, x, y):
    loss, grads = nnx.value_and_grad(lambda m: jnp.mean((m(x) - y) ** 2))(model)
    optimizer.update(model, grads)
    return loss

step = explorer.watch(train_step, log_dir=%r, name="live run", warn=False)
for _ in range(40):
    step(model, optimizer, x, y)
    time.sleep(0.25)
step.close()
"""


def test_your_runs_page_follows_a_run_while_a_script_writes_it(app):
    """A script trains with explorer.watch(log_dir=...) while the page is open:
    the page reads the log again by itself (no reload) and shows the growing
    record count, the verdict and the figures; the top navigation leads back."""
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=str(REPO))
    writer = subprocess.Popen([sys.executable, "-c", _WRITER % str(app.runs)], cwd=REPO, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    context = app.browser.new_context(viewport={"width": 1400, "height": 1600})
    try:
        deadline = time.monotonic() + 60
        while not (app.runs / "live_run" / "records.jsonl").exists():
            assert writer.poll() is None, writer.stderr.read()
            assert time.monotonic() < deadline, "the writer never started its log"
            time.sleep(0.2)
        page = context.new_page()
        page.goto(app.url + "runs", timeout=LOAD_MS)
        calls = page.get_by_text(re.compile(r"\d+ recorded call\(s\) · being written"))
        expect(calls).to_be_visible(timeout=STEP_MS)
        first = int(calls.inner_text().split(" recorded")[0].split("·")[-1])
        expect(calls, "the page did not follow the run").not_to_contain_text(
            f" {first} recorded", timeout=STEP_MS)
        expect(page.get_by_text("TRAINING", exact=False).first).to_be_visible()
        expect(page.locator(".js-plotly-plot")).to_have_count(3, timeout=STEP_MS)
        shoot(page.locator('[data-testid="stMain"]'), "runs_page.png")
        writer.wait(timeout=60)
        expect(page.get_by_text(re.compile(r"40 recorded call\(s\) · finished"))).to_be_visible(
            timeout=STEP_MS)
        page.get_by_role("link", name="Explorer").click()
        expect(progress(page)).to_contain_text(STEP_TEXT, timeout=LOAD_MS)
    finally:
        context.close()
        if writer.poll() is None:
            writer.kill()


def test_the_browser_keeps_playwrights_switches_and_opens_no_omnibox_page(app):
    """``CHROMIUM_ARGS`` gives Chromium a ``--disable-features`` of its own, which
    replaces Playwright's (Chromium keeps the last one): it must still hold every
    feature Playwright turns off, and a new context must open no page of the
    browser's own UI (the omnibox popup, a renderer of its own per window)."""
    import playwright

    lib = Path(playwright.__file__).parent / "driver" / "package" / "lib"
    found = set()
    for js in sorted(lib.rglob("*.js")):
        block = re.search(r"disabledFeatures = \[(.*?)\n\s*\]", js.read_text(errors="replace"),
                          re.S)
        if block:
            found |= set(re.findall(r'^\s*"(\w+)"', block.group(1), re.M))
    assert found, f"Playwright's disabledFeatures list is not in {lib} any more"
    ours = next(a for a in CHROMIUM_ARGS if a.startswith("--disable-features="))
    missing = found - set(ours.split("=", 1)[1].split(","))
    assert not missing, (f"Playwright now also turns off {sorted(missing)}: add them to "
                         f"benchmarks.common.PLAYWRIGHT_DISABLED_FEATURES")
    assert [a for a in CHROMIUM_ARGS if a.startswith("--disable-features")] == [ours]

    context = app.browser.new_context()
    try:
        context.new_page().goto("about:blank")
        targets = app.browser.new_browser_cdp_session().send("Target.getTargets")["targetInfos"]
    finally:
        context.close()
    assert {t["type"] for t in targets} == {"page"}, [(t["type"], t["url"]) for t in targets]

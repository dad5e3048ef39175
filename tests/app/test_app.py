"""The Streamlit app through AppTest (no browser): it runs, presets load, every
mode steps, the verdicts show, uploads replace or are refused, the edge table
reaches the engine, and model edits start new runs."""

import re

import pytest
from conftest import REPO, svg_charts
from streamlit.runtime.scriptrunner import get_script_run_ctx
from streamlit.testing.v1 import AppTest

from explorer.engine import STEPPERS
from explorer.lessons import LESSONS
from explorer.ui.common import shared_compiles
from explorer.workspace import Workspace


@pytest.fixture
def at():
    app = AppTest.from_file(str(REPO / "streamlit_app.py"), default_timeout=120)
    app.run()
    assert not app.exception, app.exception
    return app


def _ws(at):
    return at.session_state["workspace"]


def _metric(at, label):
    return next(m.value for m in at.metric if m.label == label)


def _texts(elements):
    """What the elements show: their markdown with backslash escapes resolved
    (messages quoting user text are escaped, see explorer.ui.common.plain)."""
    return re.sub(r"\\(.)", r"\1", " ".join(e.value for e in elements))


def _ok(at):
    assert not at.exception, at.exception
    assert "panel hit an error" not in _texts(at.error), _texts(at.error)


def test_app_starts_with_every_panel(at):
    assert [t.value for t in at.title] == ["GNN JIT Explorer"]
    headers = [h.value for h in at.header]
    assert sorted(headers) == ["Diagnose", "Graph", "Model", "Train"]
    assert (_metric(at, "Nodes"), _metric(at, "Edges"), _metric(at, "Classes")) == \
        ("34", "78", "2")
    assert at.radio(key="t_mode").options == list(STEPPERS)
    assert "Step 0 of 100" in at.get("progress")[0].proto.text
    assert not at.error


def test_the_first_page_imports_no_table_or_scipy_code_and_starts_no_backend():
    """A new server's first run imports the app before it draws anything, and
    the page is drawn before the model is built. Left out of that import:
    pandas and pyarrow (0.4 s; no table is on the first page), scipy (0.2 s,
    with jax.experimental.sparse, which gnncore's CSR product does not need)
    and JAX's backend (0.3 s; lessons make their arrays when they
    run). In a fresh process: this one has them all."""
    import subprocess
    import sys

    probe = (
        "import sys\n"
        "import streamlit, explorer.ui.app\n"
        "from jax._src import xla_bridge\n"
        "HEAVY = ('pandas', 'pyarrow', 'scipy', 'jax.experimental.sparse')\n"
        "print('import', [m for m in HEAVY if m in sys.modules],\n"
        "      xla_bridge.backends_are_initialized())\n"
        "from streamlit.testing.v1 import AppTest\n"
        "at = AppTest.from_file('streamlit_app.py', default_timeout=120).run()\n"
        "assert not at.exception, at.exception\n"
        "assert at.session_state['workspace'].run is not None\n"
        "print('page', [m for m in HEAVY[:2] if m in sys.modules], flush=True)\n"
        # the app compiles the step in a background thread after the page: an
        # interpreter exit in the middle of it can abort; this probe is done
        "import os; os._exit(0)\n")
    out = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True,
                         text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-3000:]
    # the page, the canvas included, and the model built after it: still no table code
    assert out.stdout.split("\n")[:2] == ["import [] False", "page []"], out.stdout


def test_a_new_servers_first_page_is_drawn_before_jax_loads():
    """In a browser, a new server's first page is drawn before its model is
    built (the browser says when the page is up: explorer.ui.common). That page
    imports no JAX, Flax or optax (0.7 s of a 2-core machine's first page): the
    modes, optimizers, layer kinds, lesson titles and the graph's split come
    from modules that load JAX on first use (explorer/lazy.py,
    gnncore.registry). The run the browser's message asks for loads them, with
    the compilation cache on, and builds the model. In a fresh process."""
    import subprocess
    import sys

    probe = (
        "import sys\n"
        "import explorer.ui.common as common\n"
        "from explorer import compile_cache\n"
        "from streamlit.testing.v1 import AppTest\n"
        "common.in_browser = lambda: True  # the model waits for the page's message\n"
        "HEAVY = ('jax', 'flax', 'optax', 'gnncore.graph', 'explorer.engine.run')\n"
        "at = AppTest.from_file('streamlit_app.py', default_timeout=120).run()\n"
        "assert not at.exception, at.exception\n"
        "ws = at.session_state['workspace']\n"
        "print('page', [m for m in HEAVY if m in sys.modules], ws.pending, ws.run,\n"
        "      at.button(key='t_play').disabled, at.get('progress')[0].proto.text)\n"
        "print('split', ws.split_info())\n"
        "print('lessons', at.selectbox(key='l_pick').options[1:3])\n"
        "print('modes', at.radio(key='t_mode').options)\n"
        "print('metrics', [m.value for m in at.metric][:3])\n"
        "at.run()  # the run the browser's message asks for\n"
        "assert not at.exception, at.exception\n"
        "ws = at.session_state['workspace']\n"
        "print('built', [m for m in HEAVY if m in sys.modules], ws.pending,\n"
        "      ws.run is not None, at.button(key='t_play').disabled,\n"
        "      compile_cache.enabled() is not None, flush=True)\n"
        "import os; os._exit(0)\n")  # the step's background compile may still run
    out = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True,
                         text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = dict(line.split(" ", 1) for line in out.stdout.strip().splitlines())
    assert lines["page"] == "[] True None True Step 0 of 100", out.stdout
    assert lines["split"].startswith("a generated split (4 training nodes per class"), out.stdout
    # the titles read from the lesson modules' source, as the loaded lessons have them
    assert lines["lessons"] == str([f"{x.number}. {x.title}" for x in LESSONS[:2]]), out.stdout
    assert lines["modes"] == str(list(STEPPERS)), out.stdout
    assert lines["metrics"] == "['34', '78', '2']", out.stdout
    assert lines["built"] == ("['jax', 'flax', 'optax', 'gnncore.graph', 'explorer.engine.run'] "
                              "False True False True"), out.stdout


def test_choosing_a_preset_replaces_the_graph(at):
    at.selectbox(key="g_preset").set_value("petersen").run()
    _ok(at)
    assert _metric(at, "Nodes") == "10" and _metric(at, "Edges") == "15"
    assert str(_ws(at).source) == "preset: petersen"
    at.selectbox(key="g_preset").set_value("sbm").run()
    at.slider(key="g_difficulty").set_value(0.5).run()
    _ok(at)
    assert _ws(at).config.difficulty == 0.5 and _metric(at, "Nodes") == "60"


@pytest.mark.parametrize("mode", list(STEPPERS))
def test_step_in_each_mode_and_the_verdict(at, mode):
    at.radio(key="t_mode").set_value(mode).run()
    at.button(key="t_step").click().run()
    at.button(key="t_step").click().run()
    _ok(at)
    steps = 2 * _ws(at).run.stepper.steps_per_call  # a click: one call (scan: K steps)
    assert _ws(at).steps_done == steps and _ws(at).config.mode == mode
    assert f"Step {steps} of 100" in at.get("progress")[0].proto.text
    banners = _texts(at.error) + _texts(at.success)
    if mode == "jax.jit":
        assert "FROZEN" in _texts(at.error) and "nnx.jit" in _texts(at.error)
        assert "TRAINING" not in banners
    else:
        assert "TRAINING" in _texts(at.success) and "FROZEN" not in banners


def test_play_runs_a_tick_and_pause_stops(at):
    at.button(key="t_play").click().run()
    _ok(at)
    ws = _ws(at)
    assert ws.playing and ws.steps_done >= 1
    at.button(key="t_pause").click().run()
    done = ws.steps_done
    at.run()
    assert not ws.playing and ws.steps_done == done


def test_a_new_servers_first_page_is_drawn_before_its_model_is_built(monkeypatch):
    """A newly started server's first session draws its whole page, then builds
    the model (its first JAX calls compile) and draws the page again; a later
    session's model is built at once, before its page."""
    shared_compiles.clear()  # what a newly started server has
    builds = []  # per build: the run before it, and the widgets drawn by then

    def build(ws, real=Workspace.build):
        drawn = get_script_run_ctx().shared.widget_user_keys_this_run
        builds.append((ws.run, {k for k in ("t_play", "t_step", "t_mode", "m_epochs", "g_preset")
                                if k in drawn}))
        real(ws)

    monkeypatch.setattr(Workspace, "build", build)
    one = AppTest.from_file(str(REPO / "streamlit_app.py"), default_timeout=120)
    one.run()
    _ok(one)
    assert builds == [(None, {"t_play", "t_step", "t_mode", "m_epochs", "g_preset"})]
    assert _ws(one).run is not None and not _ws(one).pending
    assert not one.button(key="t_play").disabled
    assert "Building the model" not in _texts(one.caption)
    two = AppTest.from_file(str(REPO / "streamlit_app.py"), default_timeout=120)
    two.run()
    _ok(two)
    assert builds[1:] == [(None, set())] and _ws(two).run is not None


def test_a_page_waiting_for_its_model_says_so_and_play_waits(monkeypatch):
    import explorer.ui.app

    shared_compiles.clear()
    monkeypatch.setattr(explorer.ui.app, "build_pending", lambda ws: None)  # never built
    at = AppTest.from_file(str(REPO / "streamlit_app.py"), default_timeout=120)
    at.run()
    _ok(at)
    assert _ws(at).pending and _ws(at).run is None
    assert "Building the model now that the page is drawn" in _texts(at.caption)
    assert at.button(key="t_play").disabled and at.button(key="t_step").disabled
    assert "Step 0 of 100" in at.get("progress")[0].proto.text
    assert _metric(at, "Nodes") == "34"


def test_a_first_model_that_fails_to_build_is_an_error_not_a_traceback(monkeypatch):
    def fail(ws):
        raise RuntimeError("no memory for the weights")

    shared_compiles.clear()
    monkeypatch.setattr(Workspace, "build", fail)
    at = AppTest.from_file(str(REPO / "streamlit_app.py"), default_timeout=120)
    at.run()
    assert not at.exception, at.exception
    assert not _ws(at).pending and _ws(at).run is None
    assert "cannot build the model: RuntimeError: no memory for the weights" in _texts(at.error)
    assert at.button(key="t_play").disabled


def test_two_sessions_share_one_compile_and_nothing_else():
    """The server compiles a step once for every session with the same shapes
    and settings (explorer/ui/common.py: shared_compiles), and each session
    still trains its own model from its own initial weights."""
    shared_compiles.clear()  # what a newly started server has
    one, two = (AppTest.from_file(str(REPO / "streamlit_app.py"), default_timeout=120)
                for _ in range(2))
    one.run()  # the page is drawn, then the step compiles in the background
    assert "Compiling the training step in the background" in _texts(one.caption)
    _ws(one).run.warm_up().join()
    one.run()
    assert "The training step was compiled in the background in" in _texts(one.caption)
    for _ in range(3):
        one.button(key="t_step").click().run()
    assert "compiled in the background in" not in _texts(one.caption)  # before step 1 only
    two.run()
    _ws(two).run.warm_up().join()
    two.run()
    assert "already compiled for these shapes on this server" in _texts(two.caption)
    two.button(key="t_step").click().run()
    _ok(one)
    _ok(two)
    first, second = _ws(one), _ws(two)
    assert first is not second and first.shared is second.shared
    assert first.run.model is not second.run.model
    assert (first.steps_done, second.steps_done) == (3, 1)
    # session 1's page compiled the step in the background once it was drawn
    assert first.run.compiled_ahead["traced"] and first.run.trace_count == 1
    assert not first.run.history[0].traced
    assert "compiled in the background" in first.run.history[0].reused
    assert "step 1 did not trace: it was compiled in the background" in _texts(one.caption)
    # session 2's page found it compiled: no trace at all
    assert second.run.compiled_ahead == {"seconds": second.run.compiled_ahead["seconds"],
                                         "traced": False}
    assert second.run.trace_count == 0 and not second.run.history[0].traced
    # session 2 started from the seed's weights, not from session 1's trained ones
    assert second.run.history[0].loss == first.run.history[0].loss
    assert second.run.history[0].loss != first.run.history[-1].loss
    assert "step 1 did not trace: an earlier run on this server" in _texts(two.caption)
    # the diagnose panel explains why step 1 compiled nothing
    _open_tab(two, "Compile vs run")
    assert "Step 1 was due to trace but did not" in _texts(two.info)
    # a Reset in session 1 reuses the compile too, and session 2 is untouched
    one.button(key="t_reset").click().run()
    one.button(key="t_step").click().run()
    assert _ws(one).run.trace_count == 0 and _ws(one).run.history[0].reused
    assert second.steps_done == 1


def test_reset_starts_a_new_generation(at):
    at.button(key="t_step").click().run()
    generation = _ws(at).generation
    at.button(key="t_reset").click().run()
    _ok(at)
    assert _ws(at).steps_done == 0 and _ws(at).generation == generation + 1


def test_a_valid_upload_replaces_the_graph(at):
    at.file_uploader(key="g_upload").set_value(
        ("ring.edgelist", b"a b\nb c\nc a\nc d\nd e\ne f\nf d\n", "text/plain")).run()
    _ok(at)
    assert _metric(at, "Nodes") == "6" and _metric(at, "Edges") == "7"
    assert str(_ws(at).source) == "file: ring.edgelist"
    assert "labelled by community" in _texts(at.warning)


def test_an_invalid_upload_shows_the_message_and_keeps_the_graph(at):
    at.button(key="t_step").click().run()
    at.file_uploader(key="g_upload").set_value(
        ("broken.edgelist", b"0 1\n1 2\nthree\n", "text/plain")).run()
    _ok(at)
    errors = _texts(at.error)
    assert "Upload rejected" in errors and "broken.edgelist" in errors and "line 3" in errors
    assert _metric(at, "Nodes") == "34" and _ws(at).steps_done == 1
    at.button(key="t_step").click().run()  # the app keeps running on the old graph
    assert _ws(at).steps_done == 2


def test_an_edge_added_in_the_edge_editor_reaches_the_engine(at):
    ws = _ws(at)
    at.button(key="t_step").click().run()
    assert f"g_edges_{ws.revision}" not in at.session_state  # closed: no table drawn
    at.session_state["g_edge_table"] = True  # the person opens the expander
    at.run()
    at.session_state[f"g_edges_{ws.revision}"] = {
        "edited_rows": {}, "added_rows": [{"source": "0", "target": "9"}], "deleted_rows": []}
    at.run()
    _ok(at)
    assert ws.drawing.has_edge(0, 9)
    assert ws.run.graph.num_edges == 158 and ws.steps_done == 1  # same run, new graph
    at.button(key="t_step").click().run()
    assert ws.run.history[-1].traced
    assert "edges 156 -> 158" in ws.run.history[-1].trace_cause


def _picker(at):
    """The "Selected nodes" box (its key changes with each selection the canvas makes)."""
    (box,) = [m for m in at.multiselect if m.label == "Selected nodes"]
    return box


def test_graph_tools_use_the_selection(at):
    ws = _ws(at)
    _picker(at).set_value([0, 9]).run()
    at.button(key="g_connect").click().run()
    _ok(at)
    assert ws.drawing.has_edge(0, 9) and _metric(at, "Edges") == "79"
    assert ws.selected == (0, 9)  # the selection stays, and is what the canvas shows
    at.button(key="g_connect").click().run()
    assert "already connected" in _texts(at.error)
    _picker(at).set_value([0]).run()
    at.button(key="g_connect").click().run()
    assert "select exactly two nodes to connect (selected: 1)" in _texts(at.error)
    at.button(key="g_undo").click().run()
    assert not ws.drawing.has_edge(0, 9) and _metric(at, "Edges") == "78"


def test_colouring_by_prediction_and_embedding(at):
    at.button(key="t_step").click().run()
    at.radio(key="g_colour").set_value("prediction").run()
    _ok(at)
    at.radio(key="g_colour").set_value("embedding").run()
    at.selectbox(key="g_layer").set_value(1).run()
    _ok(at)


def test_model_edits_start_a_new_run(at):
    ws = _ws(at)
    at.button(key="t_step").click().run()
    generation = ws.generation
    at.button(key="m_add_layer").click().run()
    _ok(at)
    assert len(ws.config.layers) == 3 and ws.generation == generation + 1
    first = at.session_state["m_layers"][0]
    at.selectbox(key=f"m_{first}_kind").set_value("gat").run()
    at.number_input(key=f"m_{first}_heads").set_value(4).run()
    _ok(at)
    assert ws.config.layers[0].kind == "gat" and ws.config.layers[0].options == {"heads": 4}
    at.button(key="t_step").click().run()
    assert ws.steps_done == 1
    at.number_input(key=f"m_{first}_heads").set_value(3).run()  # 16 is not divisible by 3
    _ok(at)
    assert "not divisible by heads=3" in _texts(at.error) and ws.run is None


def _open_tab(at, label: str) -> None:
    """Open the Diagnose tab ``label`` (only the open tab is drawn), as a click
    on it does: its label goes into the tabs' state and the page reruns."""
    from explorer.ui.diagnose_panel import TABS, TABS_KEY

    assert label in TABS
    at.session_state[TABS_KEY] = label
    at.run()
    tab = next(t for t in at.tabs if t.label == label)
    assert tab.children, f"the {label} tab drew nothing"


def test_race_tab_races_every_mode(at):
    _open_tab(at, "Race")
    at.number_input(key="d_steps").set_value(3).run()
    at.button(key="d_race").click().run()
    _ok(at)
    result = _ws(at).race_result
    assert [e.mode for e in result] == list(STEPPERS)
    assert "Frozen: jax.jit" in _texts(at.error)
    table = at.dataframe[-1].value
    assert list(table["mode"]) == list(STEPPERS)
    assert dict(zip(table["mode"], table["verdict"]))["jax.jit"] == "FROZEN"
    saves = dict(zip(table["mode"], table["donation saves"]))
    assert saves["nnx.jit"] == saves["eager"] == "n/a" and saves["functional"] != "n/a"
    assert "B" in saves["scan"] and "B" in dict(zip(table["mode"], table["peak memory"]))[
        "nnx.jit"]
    assert "Donation saves, jax.jit: n/a: the step returns no new state" in _texts(at.caption)


def test_compile_tab_measures_and_names_a_retrace(at):
    ws = _ws(at)
    at.button(key="t_step").click().run()
    ws.connect([0, 9])
    _open_tab(at, "Compile vs run")
    assert "next step will retrace" in _texts(at.warning)
    at.button(key="d_measure").click().run()
    _ok(at)
    assert ws.compile_info and ws.compile_info["compile_s"] > 0
    assert any("XLA compile" in c.value for c in at.caption)


def test_download_as_script_reproduces_the_edited_run(at, tmp_path):
    """The train panel's "Download as script" on an edited graph: the script,
    run on its own, prints the losses the app's run just showed."""
    import os
    import subprocess
    import sys

    from explorer.ui.train_panel import script_download

    at.radio(key="t_mode").set_value("functional").run()
    ws = _ws(at)
    ws.connect([0, 9])  # what the graph panel's Connect tool does
    for _ in range(3):
        at.button(key="t_step").click().run()
    _ok(at)
    button = at.get("download_button")[0]
    assert button.label == "Download as script" and button.key == "t_export"
    make, name = script_download(_ws(at))
    assert name == "gnn_karate_functional.py"
    path = tmp_path / name
    path.write_text(make())
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=str(REPO))
    out = subprocess.run([sys.executable, str(path), "--steps", "3"], capture_output=True,
                         text=True, env=env, timeout=300, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    rows = [line.split() for line in out.stdout.splitlines()
            if line.split() and line.split()[0].isdigit()]
    assert [float(r[1]) for r in rows] == pytest.approx(
        [round(r.loss, 6) for r in _ws(at).run.history], abs=1.5e-6)
    assert _ws(at).run.graph.num_edges == 158  # the edit is in the script's graph
    assert "(0, 9)" in path.read_text() and "(9, 0)" in path.read_text()


# ------------------------------------------------------------------ speed
def test_the_speed_table_is_ordered_slowest_first():
    from explorer.ui.train_panel import DEFAULT_SPEED, SPEED_BY_NAME, SPEEDS

    rates = [s.steps_per_s for s in SPEEDS]
    assert rates == sorted(rates) and len(set(rates)) == len(rates), rates
    assert len(SPEED_BY_NAME) == len(SPEEDS)  # unique names
    assert all(s.every_s > 0 for s in SPEEDS)
    slow = SPEEDS[0]
    assert "slow motion" in slow.name and slow.steps_per_tick == 1
    assert slow.every_s == 0.5 and slow.steps_per_s == 2.0
    full = SPEEDS[-1]
    assert full.name == DEFAULT_SPEED == "full speed" and full.steps_per_tick is None
    assert full.steps_per_s == float("inf")


def test_speed_options_run_slowest_to_fastest_and_slow_motion_plays_slowly(at, monkeypatch):
    import streamlit

    from explorer.ui.train_panel import SPEED_BY_NAME

    slider = at.select_slider(key="t_speed")
    rates = [SPEED_BY_NAME[name].steps_per_s for name in slider.options]
    assert rates == sorted(rates) and len(set(rates)) == len(rates), slider.options
    assert slider.value == "full speed" and _ws(at).steps_per_tick is None

    started = []  # (function, run_every) of every fragment the page starts

    def spy(func=None, *, run_every=None, **kwargs):
        started.append((getattr(func, "__name__", None), run_every))
        return real(func, run_every=run_every, **kwargs)

    def every(name):  # the latest run_every of the fragment drawing ``name``
        return [e for f, e in started if f == name][-1]

    real = streamlit.fragment
    monkeypatch.setattr(streamlit, "fragment", spy)
    at.select_slider(key="t_speed").set_value("slow motion (2 steps/s)").run()
    _ok(at)
    ws = _ws(at)
    assert ws.steps_per_tick == 1 and every("_live") is None  # not playing: no timer
    at.button(key="t_play").click().run()
    _ok(at)
    assert ws.playing and ws.steps_done == 1  # one tick, one step
    assert every("_live") == 0.5  # the next tick in half a second: 2 steps/s
    ws.target_steps = 100_000  # a fast host could finish 100 steps in one full-speed tick
    at.run()  # a rerun is one more tick
    assert ws.steps_done == 2 and every("_live") == 0.5
    at.select_slider(key="t_speed").set_value("full speed").run()
    assert ws.steps_per_tick is None and ws.steps_done > 3 and every("_live") == 0.1
    at.button(key="t_pause").click().run()
    assert every("_live") is None


def test_charts_are_rebuilt_at_most_once_a_second_while_training():
    """Between rebuilds the same figures come back, which the browser does not
    redraw; the first point and a paused run are drawn at once."""
    from explorer.config import RunConfig
    from explorer.ui.train_panel import CHART_EVERY_S, chart_figures
    from explorer.workspace import Workspace

    ws = Workspace(RunConfig(epochs=10_000))  # still training after every tick below
    ws.steps_per_tick = 5
    cache = {}
    empty = chart_figures(ws, cache, now=0.0)
    assert chart_figures(ws, cache, now=0.1)[0] is not empty[0]  # not playing: always fresh
    token = ws.play()
    ws.tick(token)  # the compiling step
    first = chart_figures(ws, cache, now=0.2)
    assert _points(first[0]) == _points(first[1]) == 1  # the first point shows at once
    ws.tick(token)
    assert chart_figures(ws, cache, now=0.2 + CHART_EVERY_S / 2)[0] is first[0]  # reused
    later = chart_figures(ws, cache, now=0.2 + CHART_EVERY_S)
    assert later[0] is not first[0] and _points(later[0]) == ws.steps_done > 1
    ws.pause()
    assert chart_figures(ws, cache, now=0.3 + CHART_EVERY_S)[0] is not later[0]  # paused
    ws.reset()
    ws.play()
    fresh = chart_figures(ws, cache, now=0.4 + CHART_EVERY_S)  # a new run: no points
    assert _points(fresh[0]) == _points(fresh[1]) == 0 and "Press Step or Play" in fresh[0]


def _points(svg: str) -> int:
    """How many steps a train-panel chart (explorer/linechart.py) draws."""
    return int(re.search(r"data-points='(\d+)'", svg).group(1))


def _chart(at, title: str) -> str:
    """The SVG of the train panel's chart titled ``title``."""
    return next(svg for svg in svg_charts(at) if f"aria-label='{title}'" in svg)


# ------------------------------------------------------- empty splits
def test_no_test_nodes_reads_n_a_not_0_percent(at):
    """The 'path' preset (8 nodes, 4 per class) puts every node in train with
    the default 4 per class: val and test are empty."""
    at.selectbox(key="g_preset").set_value("path").run()
    at.button(key="t_step").click().run()
    _ok(at)
    run = _ws(at).run
    assert int(run.graph.test_mask.sum()) == 0 and int(run.graph.val_mask.sum()) == 0
    assert run.history[-1].test_acc == 0.0  # the engine's score of an empty split
    test = next(m for m in at.metric if m.label == "Test acc")
    assert test.value == "n/a" and "no test nodes" in test.help
    train = next(m for m in at.metric if m.label == "Train acc")
    assert train.value.endswith("%")
    chart = _chart(at, "Accuracy")
    assert re.findall(r"data-series='(\w+)'", chart) == ["train"]  # no fake 0 % lines
    assert "no val / test nodes: curves left out" in chart


@pytest.mark.parametrize("tab, key", [("Parameter changes", "d_heatmap"),
                                      ("Compile vs run", "d_step_time")])
def test_play_sends_the_diagnose_charts_unchanged_until_pause(at, tab, key):
    """The page Play reruns redraws the loss chart (its first point) and keeps
    the open Diagnose tab's chart as it was (the panel refreshes on pause): an
    unchanged figure is not redrawn by the browser."""
    def specs():
        return {"t_loss": _chart(at, "Training loss"),
                key: next(c.proto.spec for c in at.get("plotly_chart") if key in c.proto.id)}

    _open_tab(at, tab)
    before = specs()
    at.button(key="t_play").click().run()
    _ok(at)
    assert _ws(at).playing and _ws(at).steps_done >= 1
    playing = specs()
    assert playing["t_loss"] != before["t_loss"]
    assert playing[key] == before[key]
    assert "refresh when you pause" in _texts(at.caption)
    at.button(key="t_pause").click().run()
    assert specs()[key] != before[key]


def test_only_the_open_diagnose_tab_is_drawn(at):
    """The first page holds no Plotly chart (the browser loads Plotly's code when
    a tab that has one opens); each tab draws its own content once opened."""
    from explorer.ui.diagnose_panel import TABS

    assert not at.get("plotly_chart") and [t.label for t in at.tabs] == list(TABS)
    at.button(key="t_step").click().run()
    assert at.dataframe and not at.get("plotly_chart")  # the audit's table, no chart
    _open_tab(at, "Parameter changes")
    assert [c.proto.id for c in at.get("plotly_chart")] and not at.dataframe
    assert any("d_heatmap" in c.proto.id for c in at.get("plotly_chart"))
    _open_tab(at, "Race")
    assert not at.get("plotly_chart") and at.button(key="d_race")
    _open_tab(at, "Verdict & audit")
    assert at.dataframe and not at.get("plotly_chart")


def test_a_click_waiting_on_a_training_tick_is_seen_and_a_fragment_timer_is_not():
    """``interaction_waiting`` reads Streamlit's own pending-rerun object (the real
    class of the pinned version, filled the way the server fills it)."""
    from streamlit.proto.WidgetStates_pb2 import WidgetStates
    from streamlit.runtime.scriptrunner_utils.script_requests import RerunData, ScriptRequests

    from explorer.ui.common import pending_action

    def states(trigger: str | None = None, value: str = "x"):
        out = WidgetStates()
        w = out.widgets.add()
        w.id, w.int_value = "slider", 3  # a widget's plain value travels with every rerun
        if trigger is not None:
            t = out.widgets.add()
            t.id = "canvas"
            setattr(t, trigger, value)
        return out

    def pending(*requests):
        r = ScriptRequests()
        for data in requests:
            r.request_rerun(data)
        return pending_action(r)

    timer = RerunData(fragment_id="live", is_auto_rerun=True, widget_states=states())
    canvas = RerunData(fragment_id="canvas", widget_states=states("json_trigger_value",
                                                                  '{"events": []}'))
    assert not pending()  # nothing asked
    assert not pending(timer)  # the live fragment's own timer
    assert not pending(RerunData(fragment_id="canvas", widget_states=states(
        "json_trigger_value", "")))  # an empty trigger
    assert pending(canvas)
    assert pending(canvas, timer)  # a timer coming after the click does not hide it
    assert pending(RerunData(fragment_id="x", widget_states=states("trigger_value", True)))
    assert pending(RerunData(widget_states=states()))  # a whole-page rerun (a radio)
    # a callback's st.rerun("canvas") (no widget states: it names its fragment)
    assert pending(timer, RerunData(fragment_id_queue=["canvas"], is_fragment_scoped_rerun=True))
    assert not pending_action(None) and not pending_action(object())
    stopped = ScriptRequests()
    stopped.request_stop()  # the tab closed: the run ends at its next element
    assert pending_action(stopped)


@pytest.fixture
def runner_options():
    """Streamlit's runner options as Streamlit's defaults, put back afterwards."""
    from streamlit import config

    from explorer.ui.script import RUNNER_OPTIONS

    saved = {key: (config.get_option(key), config.get_where_defined(key))
             for key in RUNNER_OPTIONS}
    for key in RUNNER_OPTIONS:
        config.set_option(key, True, where_defined=config.ConfigOption.DEFAULT_DEFINITION)
    yield config
    for key, (value, where) in saved.items():
        config.set_option(key, value, where_defined=where)


def test_a_run_of_the_app_turns_fast_reruns_and_the_collection_after_each_run_off(
        runner_options):
    """With ``runner.fastReruns`` on, a click that reruns the page starts a second
    script thread at once, beside a training tick still running in the first:
    CI saw the page say step 315 after Pause while the run went on to 316, and
    one Step then show 317. The app's own run turns it off (an installed
    package reads no ``.streamlit/config.toml``)."""
    config = runner_options
    assert config.get_option("runner.fastReruns") and config.get_option("runner.postScriptGC")
    app = AppTest.from_file(str(REPO / "streamlit_app.py"), default_timeout=120)
    app.run()
    assert not app.exception, app.exception
    assert config.get_option("runner.fastReruns") is False
    assert config.get_option("runner.postScriptGC") is False


def test_runner_options_set_by_hand(runner_options):
    """A hand-set ``postScriptGC`` (``--runner.postScriptGC true``, as
    ``bench_ui --compare-gc`` passes) is kept; ``fastReruns`` is not negotiable."""
    from explorer.ui.script import apply_runner_options

    config = runner_options
    for key in ("runner.fastReruns", "runner.postScriptGC"):
        config.set_option(key, True, where_defined="command-line")
    apply_runner_options()
    assert config.get_option("runner.fastReruns") is False
    assert config.get_option("runner.postScriptGC") is True


def test_an_unlabelled_drawing_shows_why_it_has_nothing_to_learn(at):
    _ws(at).clear()
    _ws(at).add_node()
    at.run()
    at.button(key="t_step").click().run()
    _ok(at)
    assert "Nothing to learn from: no node has a label" in _texts(at.warning)


def test_scan_steps_input_shows_only_in_scan_mode_and_sets_k(at):
    assert not [n for n in at.number_input if n.key == "t_scan_steps"]
    at.radio(key="t_mode").set_value("scan").run()
    _ok(at)
    ws = _ws(at)
    assert at.number_input(key="t_scan_steps").value == 10
    at.number_input(key="t_scan_steps").set_value(4).run()
    _ok(at)
    assert ws.config.scan_steps == 4 and ws.run.stepper.steps_per_call == 4
    at.button(key="t_step").click().run()
    _ok(at)
    assert ws.steps_done == 4 and "one call ran 4 steps" in _texts(at.caption)
    at.radio(key="t_mode").set_value("functional").run()
    _ok(at)
    assert not [n for n in at.number_input if n.key == "t_scan_steps"]
    assert ws.config.scan_steps == 4  # kept (and in the link) for a return to scan


@pytest.mark.parametrize("mode, saves", [("functional", "B"), ("nnx.jit", "n/a")])
def test_compile_tab_shows_memory_and_what_donation_saves(at, mode, saves):
    at.radio(key="t_mode").set_value(mode).run()
    at.button(key="t_step").click().run()
    _open_tab(at, "Compile vs run")
    at.button(key="d_measure").click().run()
    _ok(at)
    assert _metric(at, "Peak").endswith("B") and _metric(at, "Arguments").endswith("B")
    assert saves in _metric(at, "Donation saves")
    help_text = next(m.help for m in at.metric if m.label == "Donation saves")
    assert "donate_argnums=(0,)" in help_text
    if mode == "nnx.jit":
        assert help_text.startswith("n/a: this mode hands the modules to nnx.jit")

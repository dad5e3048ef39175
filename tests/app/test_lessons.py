"""Classroom lessons: each runs in the app, shows its measured symptom and,
after "apply the fix", the fix beside it; the measurements behind each
verdict are checked too (a lesson cannot pass by printing a canned result)."""

import re
import sys

import numpy as np
import pytest
from conftest import REPO, svg_charts
from streamlit.testing.v1 import AppTest

from explorer import lessons, links
from explorer.config import RunConfig
from explorer.lessons import LESSONS, common, frozen_dropout

# lesson key -> (pitfall verdict, fix verdict), as the banners show them
VERDICTS = {
    "frozen-params": ("FROZEN", "TRAINING"),
    "frozen-dropout": ("SAME MASK", "NEW MASK EACH STEP"),
    "frozen-batchnorm": ("STATS FROZEN", "STATS UPDATED"),
    "functional-loop": ("STALE OBJECTS", "UP TO DATE"),
    "overhead": ("PYTHON OVERHEAD", re.compile("OVERHEAD SKIPPED|NO CLEAR DIFFERENCE")),
    "pool-size": ("ValueError", "COMPILES"),
    "norm-batch-size": ("ValueError", "COMPILES"),
    "dynamic-shapes": ("2 ERRORS", "COMPILES"),
    "gcn-cached": ("2 ERRORS", "COMPILES"),
    "retracing": ("4 TRACES", "1 TRACE"),
    "timing": (re.compile(r"[\d.]+ ms\?"), re.compile(r"[\d.]+ ms")),
    "trace-side-effects": ("RAN 1 OF 5 CALLS", "RAN 5 OF 5 CALLS"),
    "python-if": ("TracerBoolConversionError", "COMPILES"),
    "module-inside-jit": ("NOTHING LEARNED", "TRAINING"),
    "closure-capture": ("ValueError", "TRAINING"),
    "loop-of-tiny-jits": (re.compile(r"[\d.]+ ms / step"),
                          re.compile("FEWER DISPATCHES|NO CLEAR DIFFERENCE")),
    "timing-first-call": (re.compile(r"[\d.]+ ms\?"), re.compile(r"[\d.]+ ms")),
    "unsynced-replicas": ("REPLICAS DRIFT", "IN SYNC"),
}
# Fixes judged by timings in rounds: on a loaded machine the rounds can overlap, and
# then the lesson says so (a red banner) instead of claiming the win
TIMED_VERDICT = "NO CLEAR DIFFERENCE"


@pytest.fixture(autouse=True)
def smaller_large_graph(monkeypatch):
    monkeypatch.setattr(common, "LARGE_NODES", 6000)


def test_the_titles_read_from_source_are_the_lessons_own():
    # the picker's titles come from each module's source, not from its import
    assert lessons.titles() == {lesson.key: lesson.title for lesson in LESSONS}
    assert list(lessons.titles()) == list(lessons.ORDER)


def _texts(elements):
    return [e.value for e in elements]


def _banner(texts, verdict, label):
    pattern = verdict if isinstance(verdict, re.Pattern) else re.compile(re.escape(verdict))
    return any(t.endswith(f"— {label}") and pattern.fullmatch(t[2:t.index("** — ")])
               for t in texts)


def _check_measurements(key, pitfall, fix, ws):
    """What each verdict rests on."""
    if key == "frozen-params":
        assert len(set(pitfall.losses)) == 1 and len(pitfall.losses) == 10
        assert fix.losses[-1] < fix.losses[0]
        assert ws.config.mode == "nnx.jit" and ws.audit().verdict.status == "training"
    elif key == "frozen-dropout":
        assert len(set(pitfall.matrix)) == 1 and len(pitfall.matrix) == 4
        assert len(set(fix.matrix)) == 4
    elif key == "frozen-batchnorm":
        assert all(r["running mean"] == 0 and r["running var"] == 1 for r in pitfall.rows)
        assert any(r["running mean"] != 0 for r in fix.rows)
    elif key == "functional-loop":
        assert "0 of 4 parameters differ" in pitfall.summary
        assert "4 of 4 parameters changed" in fix.summary
        assert pitfall.losses == fix.losses and pitfall.losses[-1] < pitfall.losses[0]
    elif key == "unsynced-replicas":
        spread = "max |replica 0 - replica 1|"
        assert pitfall.rows[0]["replica 0 norm"] != pitfall.rows[0]["replica 1 norm"]
        assert pitfall.rows[-1][spread] > 0.1  # apart, and further apart each step
        assert pitfall.rows[-1][spread] > pitfall.rows[0][spread]
        assert all(r[spread] == 0 for r in fix.rows)
        assert all(r["replica 0 norm"] == r["replica 1 norm"] for r in fix.rows)
        assert pitfall.losses[-1] < pitfall.losses[0]  # and the loss falls all the same
    elif key == "overhead":
        times = {(r["graph"].split()[0], r["mode"]): r["median step ms"] for r in fix.rows}
        assert len(times) == 6  # four modes on the tiny graph, two on the large one
        # The tiny graph is where the per-call Python walk shows.
        assert times["karate", "nnx.jit"] > times["karate", "functional"]
        # one measurement: the pitfall's nnx.jit rows are the fix's
        shown = {(r["graph"].split()[0], r["mode"]): r["median step ms"] for r in pitfall.rows}
        assert shown == {k: v for k, v in times.items() if k[1] == "nnx.jit"}
        assert all("–" in r["fastest–slowest round"] for r in fix.rows)
    elif key in ("pool-size", "norm-batch-size"):
        assert ("size=" if key == "pool-size" else "num_graphs=") in pitfall.summary
        assert len(fix.rows) == 4
        if key == "norm-batch-size":
            assert all(abs(r["mean of output"]) < 1e-4 for r in fix.rows)
            assert "LayerNorm(mode='graph') under nnx.jit → ValueError" in pitfall.evidence[0]
    elif key == "dynamic-shapes":
        assert "NonConcreteBooleanIndexError" in pitfall.evidence[0]
        assert "coalesce is eager-only" in pitfall.evidence[1]
        assert all(r["slots kept"] == 2 for r in fix.rows)
    elif key == "gcn-cached":
        assert "empty cache" in pitfall.evidence[0]
        assert "must run eagerly" in pitfall.evidence[1]
        assert "max |difference|" in fix.summary
    elif key == "retracing":
        assert [r["traced"] for r in pitfall.rows] == ["yes"] * 4
        assert [r["why"] for r in pitfall.rows[1:]] == [
            f"shapes changed: directed edges {a} -> {a + 2}" for a in (156, 158, 160)]
        assert [r["traced"] for r in fix.rows] == ["yes"] + ["no"] * 3
        assert [r["edges"] for r in fix.rows] == [156, 158, 160, 162]
    elif key == "trace-side-effects":
        assert [r["entries in the list"] for r in pitfall.rows] == [1] * 5
        assert [r["entries in the list"] for r in fix.rows] == [1, 2, 3, 4, 5]
    elif key == "python-if":
        assert "TracerBoolConversionError" in pitfall.summary and len(fix.rows) == 2
        assert all(r["eager"] == r["jnp.where"] == r["lax.cond"] for r in fix.rows)
    elif key in ("module-inside-jit", "closure-capture"):
        assert len(set(pitfall.losses)) == 1 and fix.losses[-1] < fix.losses[0]
        if key == "closure-capture":
            assert "Cannot extract graph node from different trace level" in pitfall.summary
    elif key == "loop-of-tiny-jits":
        tiny, one, scan = (r["ms per step"] for r in fix.rows)
        assert tiny > one > 0 and scan > 0
        assert pitfall.rows[0] == fix.rows[0]  # one measurement, shown on both sides
        assert len({r["loss after 64 steps"] for r in fix.rows}) == 1
    elif key == "timing-first-call":
        first, *rest = (r["ms"] for r in fix.rows)
        assert first > 10 * max(rest) and pitfall.rows == fix.rows
    elif key == "timing":
        naive, synced = (r["ms per step"] for r in fix.rows)
        assert 0 < naive < synced
        assert pitfall.rows[0] == fix.rows[0]  # the naive clock, measured once
        said = re.search(r"[\d.]+ ms \[[\d.]+–[\d.]+\]", pitfall.summary).group()
        assert said in fix.summary  # the same number, with its spread, on both sides


@pytest.mark.parametrize("lesson", LESSONS, ids=[lesson.key for lesson in LESSONS])
def test_each_lesson_shows_its_symptom_then_the_fix_side_by_side(lesson):
    at = AppTest.from_file(str(REPO / "streamlit_app.py"), default_timeout=180)
    at.query_params["lesson"] = lesson.key
    at.run()
    assert not at.exception, at.exception
    assert f"Lesson {lesson.number}: {lesson.title}" in _texts(at.subheader)
    assert lesson.explanation in _texts(at.markdown)
    pitfall_verdict, fix_verdict = VERDICTS[lesson.key]
    results = at.session_state["lesson_results"]
    pitfall = results["pitfall"]
    assert _banner(_texts(at.error), pitfall_verdict, pitfall.label), _texts(at.error)
    assert not pitfall.good and pitfall.summary in _texts(at.markdown)
    assert "fix" not in results

    at.button(key="l_fix").click().run()
    assert not at.exception, at.exception
    assert not any("panel hit an error" in t for t in _texts(at.error))
    fix = at.session_state["lesson_results"]["fix"]
    assert fix.good == (fix.verdict != TIMED_VERDICT) and fix.summary in _texts(at.markdown)
    banners = at.success if fix.good else at.error
    assert _banner(_texts(banners), fix_verdict, fix.label), _texts(banners)
    assert _banner(_texts(at.error), pitfall_verdict, pitfall.label)  # still beside it
    assert at.query_params["lesson"] == lesson.key
    _check_measurements(lesson.key, pitfall, fix, at.session_state["workspace"])
    for side, outcome in (("pitfall", pitfall), ("fix", fix)):  # the SVG loss charts
        charts = [svg for svg in svg_charts(at) if f"aria-label='Training loss ({side})'" in svg]
        if outcome.losses and not outcome.matrix:
            (svg,) = charts
            assert f"data-points='{len(outcome.losses)}'" in svg
            if len(set(outcome.losses)) == 1:  # frozen: the exact value is a tick
                assert f">{outcome.losses[0]:.6g}<" in svg
        else:
            assert not charts

    at.button(key="l_close").click().run()
    assert "lesson" not in at.query_params
    assert not any(s.startswith("Lesson ") for s in _texts(at.subheader))


def test_lessons_that_train_set_up_the_explorer_and_its_verdict_changes():
    at = AppTest.from_file(str(REPO / "streamlit_app.py"), default_timeout=180)
    at.run()
    at.selectbox(key="g_preset").set_value("petersen").run()  # the lesson must replace it
    at.selectbox(key="l_pick").set_value("frozen-batchnorm").run()
    assert not at.exception, at.exception
    ws = at.session_state["workspace"]
    assert str(ws.source) == "preset: karate"
    assert (ws.config.mode, ws.config.batch_norm, ws.steps_done) == ("jax.jit", True, 10)
    assert ws.audit().verdict.status == "frozen"
    assert at.sidebar.checkbox(key="m_batch_norm").value is True  # the model panel follows
    at.button(key="l_fix").click().run()
    ws = at.session_state["workspace"]
    assert (ws.config.mode, ws.steps_done) == ("nnx.jit", 10)
    assert ws.audit().verdict.status == "training"


def test_lesson_links_round_trip_and_unknown_lessons_are_refused_with_a_notice():
    for lesson in LESSONS:
        params = links.encode(RunConfig(), lesson=lesson.key)
        assert links.decode(params).lesson == lesson.key
        assert links.decode({"lesson": str(lesson.number)}).lesson == lesson.key
    bad = links.decode({"lesson": "nope<script>"})
    assert bad.lesson is None and "unknown lesson" in bad.notices[0]
    assert lessons.find("11") is lessons.find("timing") is LESSONS[10]
    assert [lesson.number for lesson in LESSONS] == list(range(1, 19))
    assert len({lesson.key for lesson in LESSONS}) == 18


def test_lessons_explain_in_two_to_four_sentences():
    for lesson in LESSONS:
        sentences = [s for s in re.split(r"(?<=[.!?])\s+", lesson.explanation) if s]
        assert 2 <= len(sentences) <= 4, (lesson.key, len(sentences))


def test_dropout_masks_come_from_the_model_not_a_fixture():
    """The masks shown are the run's own Dropout under the run's JIT wrapper."""
    from explorer.engine import Run
    run = Run(RunConfig(dropout=0.5, mode="nnx.jit"))
    masks = frozen_dropout.dropout_masks(run, draws=3, width=64)
    assert masks.shape == (3, 64) and len({m.tobytes() for m in masks}) == 3
    assert 0.2 < masks.mean() < 0.8  # rate 0.5
    frozen = frozen_dropout.dropout_masks(Run(RunConfig(dropout=0.5, mode="jax.jit")), draws=3)
    assert np.all(frozen == frozen[0])


def test_a_lesson_that_fails_shows_its_error_once_and_the_app_keeps_running(monkeypatch):
    from explorer.ui import lesson_panel

    def broken(ws, lesson, side):
        raise RuntimeError("device lost")

    monkeypatch.setattr(lesson_panel, "run_side", broken)
    at = AppTest.from_file(str(REPO / "streamlit_app.py"), default_timeout=180)
    at.query_params["lesson"] = "pool-size"
    at.run()
    assert not at.exception, at.exception
    assert "**ERROR** — the pitfall could not run" in _texts(at.error)
    assert any("RuntimeError: device lost" in t for t in _texts(at.markdown))
    at.button(key="t_step").click().run()  # the rest of the page still works
    assert at.session_state["workspace"].steps_done == 1


def test_lesson_keys_are_read_without_importing_jax():
    """Links check a lesson key on every page load: that must not load the
    lessons (and JAX)."""
    import subprocess
    import sys

    code = ("import sys\nfrom explorer.lessons import ORDER, key_of\n"
            "assert key_of('1') == 'frozen-params' and key_of(' Timing ') == 'timing'\n"
            "assert key_of('19') is None and key_of('nope') is None and len(ORDER) == 18\n"
            "assert 'jax' not in sys.modules, sorted(m for m in sys.modules if 'jax' in m)\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr


def test_each_lesson_lives_in_the_module_named_by_its_key():
    from explorer.lessons import ORDER

    for number, (key, lesson) in enumerate(zip(ORDER, LESSONS), start=1):
        assert (lesson.key, lesson.number) == (key, number)
        module = sys.modules[f"explorer.lessons.{key.replace('-', '_')}"]
        assert module.LESSON.title == lesson.title
    assert [lesson.trains_in_explorer for lesson in LESSONS] == [True] * 3 + [False] * 15


# ------------------------------------------------------------------ classroom
def test_closing_a_lesson_puts_back_the_graph_settings_and_link_from_before():
    at = AppTest.from_file(str(REPO / "streamlit_app.py"), default_timeout=180)
    at.query_params.update({"mode": "eager", "dropout": "0.3", "graph": "petersen"})
    at.run()
    before = at.session_state["workspace"]
    before_editor = before.editor
    at.selectbox(key="l_pick").set_value("functional-loop").run()  # sets up karate, functional
    ws = at.session_state["workspace"]
    assert (ws.config.mode, str(ws.source)) == ("functional", "preset: karate")
    assert at.query_params["mode"] == "functional"
    at.button(key="l_close").click().run()
    assert not at.exception, at.exception
    ws = at.session_state["workspace"]
    assert (ws.config.mode, ws.config.dropout, str(ws.source)) == ("eager", 0.3, "preset: petersen")
    assert ws.editor is before_editor and ws.notice == ""
    assert at.query_params["mode"] == "eager" and at.query_params["graph"] == "petersen"
    assert "lesson" not in at.query_params
    assert not any("set up the explorer" in t for t in _texts(at.info))


def test_previous_and_next_step_through_the_lessons_and_clear_stale_notices():
    at = AppTest.from_file(str(REPO / "streamlit_app.py"), default_timeout=180)
    at.query_params["lesson"] = "frozen-params"
    at.run()
    assert at.button(key="l_prev").disabled and not at.button(key="l_next").disabled
    assert any("Lesson 1 set up the explorer" in t for t in _texts(at.info))
    at.selectbox(key="l_pick").set_value("pool-size").run()  # a lesson that sets nothing up
    assert at.session_state["lesson"] == "pool-size"
    assert not any("set up the explorer" in t for t in _texts(at.info))
    at.button(key="l_next").click().run()
    assert at.session_state["lesson"] == "norm-batch-size"
    assert "Lesson 7: " in " ".join(_texts(at.subheader))
    at.button(key="l_prev").click().run()
    at.button(key="l_prev").click().run()
    assert at.session_state["lesson"] == "overhead"
    last = AppTest.from_file(str(REPO / "streamlit_app.py"), default_timeout=180)
    last.query_params["lesson"] = LESSONS[-1].key
    last.run()
    assert last.button(key="l_next").disabled and not last.button(key="l_prev").disabled


def test_code_blocks_wrap_and_flat_lines_get_a_tick_at_their_value():
    from explorer import plots

    at = AppTest.from_file(str(REPO / "streamlit_app.py"), default_timeout=180)
    at.query_params["lesson"] = "pool-size"
    at.run()
    assert at.code and all(c.proto.wrap_lines for c in at.code)
    flat = plots.loss_figure([1, 2, 3], [0.689058] * 3, y_range=(0.58, 0.70))
    assert 0.689058 in flat.layout.yaxis.tickvals
    assert "0.689058" in flat.layout.yaxis.ticktext
    falling = plots.loss_figure([1, 2, 3], [0.7, 0.65, 0.6])
    assert falling.layout.yaxis.tickvals is None  # plotly's own ticks


def test_presenter_view_collapses_the_sidebar_and_enlarges_the_type():
    at = AppTest.from_file(str(REPO / "streamlit_app.py"), default_timeout=180)
    at.query_params.update({"present": "1", "lesson": "pool-size"})
    at.run()
    assert not at.exception, at.exception
    assert any("font-size: 20px" in h.proto.body for h in at.get("html"))
    assert at.query_params["present"] == "1"  # kept in the shareable link
    plain = AppTest.from_file(str(REPO / "streamlit_app.py"), default_timeout=180).run()
    assert not any("font-size: 20px" in h.proto.body for h in plain.get("html"))
    assert links.decode({"present": "1"}).present and not links.decode({}).present


def test_timings_show_their_spread_and_compare_only_beyond_it():
    from explorer.lessons.common import Timing

    slow, fast = Timing.of([2.4, 2.2, 2.9, 2.3, 2.5]), Timing.of([0.4, 0.5, 0.38, 0.6, 0.41])
    assert str(slow) == "2.40 ms [2.20–2.90]" and str(fast) == "0.410 ms [0.380–0.600]"
    assert fast.faster_than(slow) and not slow.faster_than(fast) and not fast.overlaps(slow)
    close = Timing.of([2.35, 2.8, 2.1])
    assert close.overlaps(slow) and not close.faster_than(slow)
    assert slow.times(fast) == "5.9×" and Timing.of([1.1]).times(Timing.of([1.0])) == "1.10×"

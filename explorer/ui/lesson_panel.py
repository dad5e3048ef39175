"""Lesson panel: one click shows a JIT pitfall, its symptom and its fix.

Picking a lesson sets up the explorer (graph, model, mode) where the lesson
trains, runs it and shows the measured symptom with a short explanation;
"apply the fix" runs the fix and puts both side by side. The results live in
this session's state only.
"""

from __future__ import annotations

import contextlib
import logging

import streamlit as st

from explorer import linechart, plots
from explorer.config import RunConfig
from explorer.lessons import ORDER, find, rehearsal, titles
from explorer.lessons.base import Lesson, Outcome
from explorer.ui.common import svg_chart
from explorer.workspace import Workspace

_S = st.session_state
log = logging.getLogger("explorer.ui")
NO_LESSON = ""


def active() -> Lesson | None:
    """The lesson on show (from the picker or the page's link)."""
    key = _S.get("lesson")
    return find(key) if key else None


def open_lesson(key: str | None) -> None:
    """Show lesson ``key`` (``None`` closes the panel and puts back the graph
    and settings from before the first lesson); it runs on the next render."""
    ws = _S.get("workspace")
    if ws is not None:
        if ws.notice.startswith("Lesson "):
            ws.notice = ""  # another lesson's setup notice is stale now
        if key is None:
            _restore(ws)
    _S.lesson = key or None
    _S.lesson_results = {}
    _S.lesson_memo = {}  # a new lesson measures afresh


def _restore(ws: Workspace) -> None:
    """The graph (with its undo history) and the settings from before the
    lessons, back in the explorer (the address bar follows the config)."""
    before = _S.pop("l_before", None)
    if before is None:
        return
    editor, config = before
    if editor is not ws.editor or config != ws.config:
        try:
            ws.reopen(editor, config)
        except ValueError as err:  # the old setup cannot be built again: keep the lesson's
            ws.error = f"could not restore the graph from before the lesson: {err}"
            return
    ws.notice = ""


def _picked() -> None:
    open_lesson(_S.l_pick or None)


def _load_setup(ws: Workspace, lesson: Lesson, config: RunConfig) -> None:
    """Put the lesson's graph, model and mode into the explorer's panels (what
    was there goes back when the lessons are closed)."""
    _S.setdefault("l_before", (ws.editor, ws.config))
    ws.load_setup(config)
    ws.notice = (f"Lesson {lesson.number} set up the explorer: {config.graph}, mode "
                 f"{config.mode}" + (", bucket padding" if config.bucket_padding else "")
                 + ".")


def run_side(ws: Workspace, lesson: Lesson, side: str) -> Outcome:
    """Run the lesson's ``pitfall`` or ``fix``; where the lesson trains, it
    trains the explorer's own run, so the main charts show it too."""
    config = lesson.setup_of(side)
    if config is not None:
        _load_setup(ws, lesson, config)
        if lesson.trains_in_explorer and ws.run is not None:
            for _ in range(lesson.steps):
                ws.step()
            return lesson.outcome(side, ws.run)
    return lesson.outcome(side, memo=_S.setdefault("lesson_memo", {}))


@st.cache_resource
def _rehearsal() -> rehearsal.Rehearsal | None:
    """The server's lesson rehearsal (:mod:`explorer.lessons.rehearsal`): one
    background process for every session, started when a lesson is first
    opened. It holds no session data."""
    return rehearsal.Rehearsal() if rehearsal.wanted() else None


def _attempt(ws: Workspace, lesson: Lesson, side: str) -> Outcome:
    """:func:`run_side`, with an unexpected failure kept as an outcome (shown,
    not retried on every rerun)."""
    ahead = _rehearsal()
    held = ahead.real_run(lesson, side) if ahead is not None else contextlib.nullcontext()
    try:
        with held:  # a timing lesson never measures beside the rehearsal
            return run_side(ws, lesson, side)
    except Exception as err:  # st.rerun/st.stop are BaseExceptions and pass through
        log.exception("lesson %s (%s) failed", lesson.key, side)
        return Outcome(f"the {side} could not run", "ERROR", False,
                       f"{type(err).__name__}: {err}. The explorer keeps its graph and run; "
                       "close the lesson and open it again to retry.")


def _shared_range(*outcomes: Outcome) -> tuple[float, float] | None:
    """One loss axis for both columns, so that flat and falling compare."""
    losses = [v for o in outcomes for v in o.losses]
    if not losses:
        return None
    lo, hi = min(losses), max(losses)
    pad = max(0.05 * (hi - lo), 0.01)
    return lo - pad, hi + pad


def _outcome(outcome: Outcome, side: str, y_range=None) -> None:
    banner = st.success if outcome.good else st.error
    banner(f"**{outcome.verdict}** — {outcome.label}",
           icon=":material/check_circle:" if outcome.good else ":material/error:")
    st.markdown(outcome.summary)
    if outcome.evidence:
        st.markdown("\n".join(f"- {e}" for e in outcome.evidence))
    if outcome.matrix:
        st.plotly_chart(plots.mask_figure(outcome.matrix), key=f"l_{side}_masks",
                        config={"displaylogo": False})
    elif outcome.losses:
        steps = list(range(1, len(outcome.losses) + 1))
        # SVG, like the train panel's: a lesson opened from a class link needs no
        # chart code in the browser (explorer/linechart.py)
        with st.container(key=f"l_{side}_loss"):
            svg_chart(linechart.loss_chart(steps, outcome.losses, height=220,
                                           y_range=y_range, title=f"Training loss ({side})"),
                      key=f"l_{side}_loss_svg")
    if outcome.rows:
        st.dataframe(list(outcome.rows), hide_index=True, key=f"l_{side}_rows")
    if outcome.code:
        st.code(outcome.code, language="python", wrap_lines=True)


def render(ws: Workspace) -> None:
    options = [NO_LESSON, *ORDER]
    current = _S.get("lesson") or NO_LESSON
    if _S.get("l_pick") != current:
        _S.l_pick = current
    # read without loading the lessons (which load JAX): the first page shows this
    names = {key: f"{number}. {title}" for number, (key, title)
             in enumerate(titles().items(), start=1)}
    st.selectbox("Lesson", options, key="l_pick", on_change=_picked,
                 format_func=lambda k: names.get(k, "Pick a lesson: one JIT pitfall, "
                                                     "its symptom and its fix"),
                 help="Each lesson sets up a graph, a model and a JIT mode, runs it and "
                      "shows the symptom; 'apply the fix' shows both side by side.")
    lesson = active()
    if lesson is None:
        return
    results = _S.setdefault("lesson_results", {})
    if results.get("key") != lesson.key:
        results.clear()
        results["key"] = lesson.key
        _S.lesson_memo = {}  # e.g. a lesson opened from the link
    if "pitfall" not in results:
        with st.spinner(f"Lesson {lesson.number}: setting up, running and measuring…"):
            results["pitfall"] = _attempt(ws, lesson, "pitfall")
        st.rerun()  # redraw every panel with the lesson's setup
    with st.container(border=True, key="l_card"):
        st.subheader(f"Lesson {lesson.number}: {lesson.title}")
        st.markdown(lesson.explanation)
        st.caption(f":material/visibility: **Look at:** {lesson.symptom}")
        if "fix" not in results:
            _outcome(results["pitfall"], "pitfall")
            if st.button(lesson.fix_label, key="l_fix", type="primary",
                         icon=":material/build:"):
                with st.spinner("Applying the fix…"):
                    results["fix"] = _attempt(ws, lesson, "fix")
                st.rerun()
        else:
            left, right = st.columns(2, gap="medium")
            y_range = _shared_range(results["pitfall"], results["fix"])
            with left:
                _outcome(results["pitfall"], "pitfall", y_range)
            with right:
                _outcome(results["fix"], "fix", y_range)
        cols = st.columns(4)
        if "fix" in results and cols[0].button("Show the pitfall again", key="l_again",
                                               icon=":material/replay:"):
            results.pop("fix")
            results.pop("pitfall")
            _S.lesson_memo = {}  # measured again
            st.rerun()
        keys = ORDER
        at = keys.index(lesson.key)
        cols[1].button("Previous lesson", key="l_prev", icon=":material/arrow_back:",
                       on_click=open_lesson, args=(keys[max(at - 1, 0)],), disabled=at == 0)
        cols[2].button("Next lesson", key="l_next", icon=":material/arrow_forward:",
                       on_click=open_lesson, args=(keys[min(at + 1, len(keys) - 1)],),
                       disabled=at == len(keys) - 1)
        cols[3].button("Close the lesson", key="l_close", on_click=open_lesson, args=(None,),
                       icon=":material/close:")

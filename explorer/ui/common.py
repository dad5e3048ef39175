"""Helpers shared by the panels: the session's workspace, error guards and the
verdict banner."""

from __future__ import annotations

import dataclasses
import logging
import re
import weakref

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from explorer import links
from explorer.config import RunConfig
from explorer.engine import SharedCompiles
from explorer.sources import GraphSource
from explorer.workspace import Workspace, release_memory

log = logging.getLogger("explorer.ui")


_MARKDOWN = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:])")
# what GitHub-flavoured markdown turns into a link even when escaped (it finds
# them in the text after parsing): a URL's scheme or www, and e-mail addresses
_AUTOLINK = re.compile(r"(?i)(https?|ftp|mailto|www|@)(?=\\?[:.]|[\w-])")
WORD_JOINER = "\u2060"  # invisible, and no letter: it breaks those patterns


def data_frame(*args, **kwargs):
    """``pandas.DataFrame(*args, **kwargs)``, with pandas imported on first use:
    no table is on the first page, and importing pandas took about 0.35 s of a
    new server's first run (before anything is drawn)."""
    import pandas as pd

    return pd.DataFrame(*args, **kwargs)


#: Sets the markup it is sent as its element's HTML: the charts of
#: :mod:`explorer.linechart`, which this app builds itself (every text in them escaped)
_SVG_JS = """
export default function ({ parentElement, data }) {
  parentElement.firstElementChild.innerHTML = (data || [""])[0];
}
"""


@st.cache_resource(show_spinner=False)
def _svg_component():
    """Registered once per server (code only, no session data)."""
    return st.components.v2.component("gnn_explorer.svg", html="<div></div>", js=_SVG_JS,
                                      isolate_styles=False)


def svg_chart(svg: str, *, key: str) -> None:
    """Draw a chart from :mod:`explorer.linechart`. Markdown with
    ``unsafe_allow_html`` turned every node of the drawing into a React element
    on every redraw: a redraw of the train panel's two charts at 100 steps cost
    a 2-core machine's browser 174 ms that way and 102 ms this way, the page's
    own rerun included (``benchmarks/bench_redraw.py``). ``st.html`` keeps no
    SVG (its sanitiser allows HTML only). The markup goes as a list's one item:
    Streamlit checks a dict's values for dataframes, which imports pandas."""
    _svg_component()(data=[svg], key=key)


def plain(text) -> str:
    """``text`` escaped for Streamlit's markdown, so that it shows as the same
    characters and nothing else: no link, image, emphasis, HTML or emoji code.
    Everything a person or a file wrote (link parameters, file and node names,
    labels, lesson keys, and the messages that quote them) goes through here.
    A URL in it stays text: an invisible word joiner after its scheme (or
    ``www``, or an e-mail's ``@``) keeps markdown from making it a link."""
    escaped = _MARKDOWN.sub(r"\\\1", str(text))
    return _AUTOLINK.sub(lambda m: m.group(1) + WORD_JOINER, escaped)


@st.cache_resource(show_spinner=False)
def shared_compiles() -> SharedCompiles:
    """The server's compiled training steps, one store for every session: a
    second session (or a Reset) on the same shapes and settings trains at once
    instead of compiling again. It holds pure jitted functions and optax
    transforms, never a session's model, optimizer or history
    (explorer/engine/compiles.py)."""
    return SharedCompiles()


def workspace() -> Workspace:
    """This browser session's workspace, created on first use from the page's
    link (query parameters); never shared between sessions. Never raises: a
    link that cannot be used gives the default workspace and a notice."""
    if "workspace" not in st.session_state:
        link = links.decode(st.query_params.to_dict())
        shared = shared_compiles()
        try:
            # The server's first run: the page is drawn first and the model built
            # after it (its first JAX calls compile, about a second; explorer_page
            # builds it). Later sessions find those calls compiled: built at once.
            ws = Workspace(link.config, shared=shared, build=shared.runs > 0)
        except Exception as err:  # the link's settings must never take the page down
            log.exception("workspace from the link failed")
            link = dataclasses.replace(link, drawing=None, notices=link.notices + (
                f"the link's settings could not be used ({type(err).__name__}: "
                f"{str(err)[:200]}): default settings used",))
            ws = Workspace(RunConfig(), shared=shared_compiles())
        if link.drawing is not None:
            try:
                ws.load_drawing(link.drawing, GraphSource("shared link"))
            except Exception as err:
                log.exception("graph from the link failed")
                link = dataclasses.replace(link, notices=link.notices + (
                    f"the link's graph was not loaded: {str(err)[:200]}",))
        st.session_state.workspace = ws
        # Streamlit drops a closed tab's session some time later: its run's memory
        # then goes back to the system, not just to the allocator
        weakref.finalize(ws, release_memory)
        st.session_state.classroom = link.classroom
        st.session_state.link_notices = link.notices
        st.session_state.lesson = link.lesson
    return st.session_state.workspace


#: Says when the page is on the screen: two animation frames after it mounts
#: (the first lays the page out, the second comes after that frame was painted),
#: then once the browser has nothing else to do (at most 0.3 s later), it sets
#: its ``drawn`` trigger: a rerun of the page. Placed last on the page.
_DRAWN_JS = """
export default function ({ setTriggerValue }) {
  let gone = false;
  const idle = globalThis.requestIdleCallback || ((f) => setTimeout(f, 0));
  requestAnimationFrame(() => requestAnimationFrame(() => idle(() => {
    if (!gone) setTriggerValue("drawn", true);
  }, { timeout: 300 })));
  return () => { gone = true; };
}
"""
DRAWN_KEY = "page_drawn"  # the component's key
_ASKED = "page_drawn_asked"  # in session state: the component was placed


@st.cache_resource(show_spinner=False)
def _drawn_component():
    """Registered once per server (code only, no session data)."""
    return st.components.v2.component("gnn_explorer.page_drawn", js=_DRAWN_JS)


def _build(ws: Workspace) -> None:
    """Build the run :func:`workspace` left out. Never raises: a model that
    cannot be built shows as the workspace's error."""
    try:
        ws.build()
    except Exception as err:  # the page stays up and says why
        log.exception("building the first run failed")
        ws.pending = False
        ws.error = f"cannot build the model: {type(err).__name__}: {str(err)[:200]}"


def build_pending(ws: Workspace) -> None:
    """At the end of the page: the run :func:`workspace` left out of the
    server's first session is built once this page is on the screen.

    In a browser, the model is built (and JAX, Flax and optax loaded first:
    this page needed none of them, explorer/lazy.py) when the browser says the
    page is drawn
    (a component placed here, whose trigger reruns the page; that run builds
    the model first thing: :func:`build_if_drawn`), or by any earlier rerun a
    click asks for. Building it at once, while the browser was still drawing
    the page's last elements, took a 2-core machine's CPU from the browser: the
    first page was drawn 4.31 s after the server started, against 3.28 s this
    way (medians of five pairs; RESULTS.md). A page in a background tab gets
    no animation frames, so its model is built when the tab is first shown. A
    session with no browser behind it (no request headers: Streamlit's AppTest,
    which runs no JavaScript) builds it now and draws the page again."""
    if not ws.pending:
        return
    if in_browser():
        st.session_state[_ASKED] = True
        _drawn_component()(key=DRAWN_KEY, on_drawn_change=_ignore)
        return
    _build(ws)
    st.rerun()


def in_browser() -> bool:
    """Whether a browser runs this session's page (Streamlit's AppTest, which
    runs no JavaScript, sends no request headers)."""
    return bool(st.context.headers)


def build_if_drawn(ws: Workspace) -> None:
    """At the top of the page: build the run that :func:`build_pending` waits
    for, in the rerun the browser's signal (or a click) asked for, and start
    compiling its training step in the background at once (``Run.warm_up``),
    while this run draws the page, rather than after it."""
    if ws.pending and st.session_state.get(_ASKED):
        _build(ws)
        if ws.run is not None:
            ws.run.warm_up()


def _ignore() -> None:
    """A trigger's callback: the rerun it comes with is what matters."""


TRIGGERS = ("trigger_value", "string_trigger_value", "json_trigger_value")


def interaction_waiting() -> bool:
    """Whether the browser sent a person's action (a click, a canvas event, a
    changed widget outside a fragment) that waits for the script run in
    progress. Live training asks this between steps, so a click is answered
    after one step rather than after a whole tick. (A click waits for the run
    in progress, and is seen here, because the app turns Streamlit's
    ``runner.fastReruns`` off: explorer/ui/script.py.)

    Streamlit has no public call for this; it reads the session's pending
    rerun request (``streamlit.runtime.scriptrunner_utils.script_requests``,
    pinned 1.67) and says ``False`` whenever that shape is not found. A
    fragment's timer is not an action: its request carries no trigger and
    names only fragments. A rerun asked for by name (a callback's
    ``st.rerun(key)``) is one: it would preempt the run at its next element.
    (A canvas event whose callback already ran in this run is
    :func:`answer_due`.)"""
    ctx = get_script_run_ctx(suppress_warning=True)
    return pending_action(getattr(ctx, "script_requests", None))


def answer_due(value: bool | None = None) -> bool:
    """Whether the canvas sent events that this script run has yet to answer
    (its callback ran at the start of the run; its fragment answers later in
    the run). Live training skips its tick while it is due, so the canvas's
    fragment runs next instead of after a tick. ``answer_due(True)`` notes it,
    the canvas's fragment clears it with ``answer_due(False)``."""
    if value is not None:
        st.session_state.canvas_answer_due = value
    return bool(st.session_state.get("canvas_answer_due", False))


def pending_action(requests) -> bool:
    """:func:`interaction_waiting` for a ``ScriptRequests`` object."""
    state = getattr(getattr(requests, "_state", None), "name", None)
    if state == "STOP":
        return True  # the tab closed, or Stop: this run ends at its next element
    if state != "RERUN":
        return False
    data = getattr(requests, "_rerun_data", None)
    if data is None:
        return False
    if getattr(data, "is_fragment_scoped_rerun", False):
        return True  # asked by name (the canvas's answer): it preempts this run anyway
    if not getattr(data, "fragment_id_queue", None):
        return True  # a whole-page rerun: a widget outside the fragments changed
    states = getattr(getattr(data, "widget_states", None), "widgets", ())
    try:
        return any(state.WhichOneof("value") in TRIGGERS
                   and bool(getattr(state, state.WhichOneof("value"))) for state in states)
    except (AttributeError, ValueError, TypeError):
        return False


def classroom() -> bool:
    """The link's classroom flag: advanced controls hidden."""
    return bool(st.session_state.get("classroom"))


def presenting() -> bool:
    """Presenter view (``&present=1``): the sidebar collapsed, larger type.
    Read from the address bar, since the page is set up before the session's
    workspace exists."""
    return st.query_params.get("present") in ("1", "true")


def sync_link(ws: Workspace) -> bool:
    """Keep the address bar's query parameters equal to the current run, so
    that copying the URL shares it. Returns whether the link holds the graph
    (``False``: an edited or uploaded graph too big for a link, which then
    carries the settings only). The graph is encoded once per drawing, not on
    every rerun (a 300k-edge upload took 1.85 s a rerun)."""
    edited = not ws.source.shipped or len(ws.history) > 1
    params = links.encode(ws.config, classroom=classroom(),
                          lesson=st.session_state.get("lesson"), present=presenting())
    fits = True
    if edited and ws.task.editable:
        cached = st.session_state.get("link_graph")
        if cached is None or cached[0] is not ws.drawing:
            cached = (ws.drawing, links.graph_blob(ws.drawing))
            st.session_state.link_graph = cached
        if cached[1] is None:
            fits = False
        else:
            params["g"] = cached[1]
    if params != st.query_params.to_dict():
        st.query_params.from_dict(params)
    return fits


def guard(name: str, render, *args) -> None:
    """Run a panel; an unexpected error becomes a message in that panel (and a
    log entry) instead of a traceback, and the rest of the page still renders."""
    try:
        render(*args)
    except Exception as err:  # st.rerun/st.stop are BaseExceptions and pass through
        log.exception("%s panel failed", name)
        st.error(f"The {name} panel hit an error: {type(err).__name__}: {plain(err)}. "
                 "Your graph and run are kept; Reset starts a fresh run.")


def set_error(key: str, message: str) -> None:
    st.session_state[f"error_{key}"] = message


def show_error(key: str) -> None:
    """Show (and keep showing) the last error stored under ``key``."""
    message = st.session_state.get(f"error_{key}")
    if message:
        st.error(plain(message), icon=":material/warning:")


def attempt(key: str, action, *args) -> bool:
    """Call ``action(*args)``; a ``ValueError`` is stored as ``key``'s error
    message. Returns whether it succeeded (and then clears the message)."""
    try:
        action(*args)
    except ValueError as err:
        set_error(key, str(err))
        return False
    set_error(key, "")
    return True


def verdict_banner(report, *, detail: bool = True) -> None:
    """The verdict of an :class:`AuditReport` (or of anything with ``status``,
    ``evidence``, ``cause`` and ``fix``, e.g. a watched run's): TRAINING in
    green, FROZEN / STALE OBJECTS / NON-FINITE in red, RETRACING EVERY CALL in
    orange, with the evidence, the cause and the fix."""
    if report is None:
        st.info("No steps yet: press **Step** or **Play** to audit the training step.")
        return
    v = getattr(report, "verdict", report)
    evidence = "; ".join(v.evidence)
    status = v.status.upper()
    if v.status in ("training", "waiting", "pure"):
        shown = st.success if v.status == "training" else st.info
        shown(f"**{status}** — {evidence}.", icon=":material/check_circle:")
        return
    text = f"**{status}** — {evidence}."
    if detail:
        text += f"\n\n**Cause:** {v.cause}.\n\n**Fix:** {v.fix}."
    else:
        text += f"\n\n**Fix:** {v.fix}."
    if v.status == "retracing every call":
        st.warning(text, icon=":material/replay:")
    else:
        st.error(text, icon=":material/ac_unit:" if v.status == "frozen" else ":material/error:")

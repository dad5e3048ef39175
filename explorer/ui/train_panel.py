"""Train panel: the JIT mode, Play / Pause / Step / Reset, and the live charts.

Live training runs in a fragment that reruns every ``Speed.every_s`` of the
chosen speed while playing; each run trains one chunk (``Workspace.tick``: up to
``Speed.steps_per_tick`` steps, or steps until the time budget is spent) and
redraws. The fragment is handed the play token of the run it was started for,
so a timer that outlives a Reset does nothing.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
import time
from collections.abc import Callable

import numpy as np
import streamlit as st

from explorer import linechart
from explorer.config import LIMITS
from explorer.engine import STEPPERS
from explorer.lazy import lazy
from explorer.ui.common import (
    answer_due,
    interaction_waiting,
    plain,
    svg_chart,
    verdict_banner,
)
from explorer.workspace import Workspace

export = lazy("explorer.export")  # the script is written on a click, JAX loaded by then


@dataclasses.dataclass(frozen=True)
class Speed:
    """A training speed of the Speed slider: up to ``steps_per_tick`` steps
    (``None``: as many as fit ``Workspace.tick_budget_s``) every ``every_s``
    seconds, the redraw included."""

    name: str
    steps_per_tick: int | None
    every_s: float

    @property
    def steps_per_s(self) -> float:
        """The most steps a second this speed asks for (``inf`` at full speed)."""
        if self.steps_per_tick is None:
            return math.inf
        return self.steps_per_tick / self.every_s


#: The Speed slider's options, slowest first: the one table the panel reads.
SPEEDS = (
    Speed("slow motion (2 steps/s)", 1, 0.5),
    Speed("5 steps/s", 1, 0.2),
    Speed("1 step per tick", 1, 0.1),
    Speed("5 steps per tick", 5, 0.1),
    Speed("20 steps per tick", 20, 0.1),
    Speed("full speed", None, 0.1),  # ask for the next chunk as soon as the last is drawn
)
SPEED_BY_NAME = {s.name: s for s in SPEEDS}
DEFAULT_SPEED = "full speed"
CHART_EVERY_S = 1.0  # the charts' redraw interval while training (see chart_figures)
SPLITS = ("train", "val", "test")

_S = st.session_state


def _set_mode(ws: Workspace) -> None:
    ws.set_config(ws.config.replace(mode=_S.t_mode))


def _set_mode_setting(ws: Workspace, field: str) -> None:
    value = _S.get(f"t_{field}")
    if value is not None:
        ws.set_config(ws.config.replace(**{field: int(value)}))


def _mode_setting(ws: Workspace) -> None:
    """The input for the setting only the chosen mode reads (the scan's K)."""
    stepper = ws.config.stepper
    field = stepper.setting
    if not field:
        return
    key, bound = f"t_{field}", LIMITS[field]
    if _S.get(key) != getattr(ws.config, field):
        _S[key] = getattr(ws.config, field)
    st.number_input(stepper.setting_label, min_value=int(bound.low), max_value=int(bound.high),
                    step=1, key=key, help=stepper.setting_help, on_change=_set_mode_setting,
                    args=(ws, field))


def _speed() -> Speed:
    return SPEED_BY_NAME.get(_S.get("t_speed"), SPEED_BY_NAME[DEFAULT_SPEED])


def _set_speed(ws: Workspace) -> None:
    ws.steps_per_tick = _speed().steps_per_tick


def split_sizes(ws: Workspace) -> dict[str, int]:
    """How many nodes (graphs, for a dataset) the run's train, val and test
    splits hold. The engine scores an empty split as 0.0, so the panel asks
    this before showing an accuracy."""
    run = ws.run
    if run is None:
        return {name: 0 for name in SPLITS}
    return {name: 0 if m is None else int(np.sum(np.asarray(m)))
            for name, m in zip(SPLITS, run.task.split_masks)}


def _accuracy_metric(column, split: str, value: float, size: int, unit: str) -> None:
    """``n/a`` (with a tooltip saying why) for an empty split, else a percentage."""
    label = f"{split.capitalize()} acc"
    if size == 0:
        column.metric(label, "n/a", help=f"There are no {split} {unit} in this run, so "
                      f"there is no {split} accuracy to show.")
    else:
        column.metric(label, f"{value:.0%}", help=f"Share of the {size} {split} {unit} "
                      "predicted correctly (eval mode).")


def _ask_step() -> None:
    _S.t_steps_asked = _S.get("t_steps_asked", 0) + 1


def _step_once(ws: Workspace) -> None:
    try:
        ws.step()
    finally:  # answered, even if the step failed: a rerun must not try it again
        _S.t_steps_taken = _S.t_steps_asked


def _live(ws: Workspace, token: int) -> None:
    due, _ = answer_due(), answer_due(False)  # skip one tick at most
    if ws.playing and not due:  # a canvas answer waits later in this run: no tick now
        started = time.perf_counter()
        if ws.steps_done == 0 and ws.config.stepper.compiled:
            with st.spinner("Compiling the training step (trace → lower → XLA compile)…"):
                ws.tick(token, interaction_waiting)
        else:
            ws.tick(token, interaction_waiting)
        _S.t_last_tick_s = time.perf_counter() - started
        if not ws.playing:
            st.rerun()  # finished or stopped: stop the timer, refresh the whole page
    run = ws.run
    history = run.history if run else []
    sizes = split_sizes(ws)
    unit = ws.config.task.unit
    done, target = ws.steps_done, ws.target_steps
    st.progress(min(done / target, 1.0) if target else 0.0,
                text=f"Step {done} of {target}" + (" · training…" if ws.playing else ""))
    if history:
        last = history[-1]
        cols = st.columns(3)
        cols[0].metric("Loss", f"{last.loss:.4f}")
        _accuracy_metric(cols[1], "train", last.train_acc, sizes["train"], unit)
        _accuracy_metric(cols[2], "test", last.test_acc, sizes["test"], unit)
        call = (f"; one call ran {last.call_steps} steps in {1e3 * last.call_wall_s:.3g} ms"
                if last.call_steps > 1 else "")
        # a reuse stays explained until the next trace: it is why the count is low
        due = next((r for r in reversed(history) if r.traced or r.reused), None)
        st.caption(f"Last step {1e3 * last.wall_s:.3g} ms (synced wall time{call}) · traces "
                   f"so far: {last.trace_count}" + (
                       f" · this step traced: {last.trace_cause}" if last.traced else
                       f" · step {due.step} did not trace: {due.reused}"
                       if due and due.reused else ""))
    if ws.error:
        st.error(plain(ws.error), icon=":material/block:")
    hint = ws.training_hint()
    if hint:
        st.warning(hint, icon=":material/label_off:")
    verdict_banner(ws.audit(), detail=False)
    loss, acc = chart_figures(ws, _S.setdefault("t_chart_cache", {}), time.perf_counter())
    # SVG drawn here, not Plotly: no chart code for the browser to load before
    # the first page is up (explorer/linechart.py)
    for key, svg in (("t_loss", loss), ("t_acc", acc)):
        with st.container(key=key):
            svg_chart(svg, key=f"{key}_svg")


def chart_figures(ws: Workspace, cache: dict, now: float) -> tuple[str, str]:
    """``(loss chart, accuracy chart)`` of the run, as SVG markup. While it
    trains they are rebuilt at most every ``CHART_EVERY_S`` (and at once for
    the first point); in between the previous charts come back unchanged,
    which the browser does not redraw (redrawn every tick, the Plotly charts
    these replaced kept a 2-core machine's browser busy 77 % of the time).
    ``cache`` keeps them per session."""
    run = ws.run
    history = run.history if run else []
    key = (ws.generation, len(history))
    last = cache.get("figures")
    if last is not None and ws.playing and last["key"][0] == ws.generation and (
            key == last["key"] or (last["key"][1] > 0 and now - last["at"] < CHART_EVERY_S)):
        return last["loss"], last["acc"]
    sizes = split_sizes(ws)
    unit = ws.config.task.unit
    steps = [r.step for r in history]
    loss = linechart.loss_chart(steps, [r.loss for r in history], height=260)
    acc = linechart.accuracy_chart(steps, [r.train_acc for r in history],
                                   [r.val_acc for r in history],
                                   [r.test_acc for r in history], height=240,
                                   empty=[name for name, n in sizes.items() if n == 0],
                                   unit=unit)
    cache["figures"] = {"key": key, "at": now, "loss": loss, "acc": acc}
    return loss, acc


def script_download(ws: Workspace) -> tuple[Callable[[], str], str] | None:
    """``(make the script, file name)`` for "Download as script": a standalone
    script reproducing the current run (its graph embedded, edits included);
    ``None`` when there is no run. The script is written only on click."""
    if ws.run is None:
        return None
    config = ws.config
    if config.task.editable:  # a drawn or uploaded graph goes into the script
        name = ws.source.name or "graph"
        make = functools.partial(export.script_for, config, ws.run.graph, graph_name=name)
    else:
        make = functools.partial(export.script_for, config)
        name = config.graph
    slug = re.sub(r"[^a-z0-9]+", "_", f"{name}_{config.mode}".lower()).strip("_")
    return make, f"gnn_{slug}.py"


def _ahead_status(ws: Workspace) -> None:
    """Before the first step: the model being built after the first page, or
    the training step compiling in the background
    (``Run.warm_up``), or how it went."""
    ahead = ws.run.ahead_status if ws.run and not ws.playing else ""
    if ws.pending:
        st.caption(":material/hourglass_top: Building the model now that the page is drawn "
                   "(JAX loads and its first calls compile); Play is ready in a moment.")
    elif ahead == "compiling":
        st.caption(":material/hourglass_top: Compiling the training step in the background "
                   "(trace → lower → XLA compile) now that the page is drawn; Play waits for "
                   "it if it has not finished.")
    elif ahead:
        seconds = ws.run.compiled_ahead["seconds"]
        st.caption(":material/bolt: " + (
            f"The training step was compiled in the background in {seconds:.2f} s"
            if ahead == "compiled" else "The training step was already compiled for these "
            "shapes on this server") + ": Play starts at once.")


def render(ws: Workspace) -> None:
    st.header("Train")
    if _S.get("t_mode") != ws.config.mode:
        _S.t_mode = ws.config.mode
    st.radio("JIT mode", list(STEPPERS), key="t_mode", horizontal=True,
             on_change=_set_mode, args=(ws,))
    st.caption(ws.config.stepper.summary)
    _mode_setting(ws)
    cols = st.columns(4)
    stretch = {"width": "stretch"}
    cols[0].button("Play", key="t_play", icon=":material/play_arrow:", on_click=ws.play,
                   type="primary", disabled=ws.playing or ws.run is None, **stretch)
    cols[1].button("Pause", key="t_pause", icon=":material/pause:", on_click=ws.pause,
                   disabled=not ws.playing, **stretch)
    cols[2].button("Step", key="t_step", icon=":material/skip_next:", on_click=_ask_step,
                   disabled=ws.run is None, **stretch)
    cols[3].button("Reset", key="t_reset", icon=":material/restart_alt:", on_click=ws.reset,
                   help="Fresh weights from the seed; the history is cleared.", **stretch)
    with st.container():  # always there: the status coming and going shifts nothing below
        _ahead_status(ws)
    if _S.get("t_steps_taken", 0) < _S.get("t_steps_asked", 0):
        # one step per click: counted, not read from the button, whose value a
        # run interrupted by another rerun hands on to the next run (two steps)
        if ws.steps_done == 0 and ws.config.stepper.compiled:
            with st.spinner("Compiling the training step…"):
                _step_once(ws)
        else:
            _step_once(ws)
    download = script_download(ws)
    st.download_button(
        "Download as script", data=download[0] if download else "", key="t_export",
        file_name=download[1] if download else "run.py", mime="text/x-python",
        on_click="ignore", icon=":material/download:", disabled=download is None,
        help="A standalone Python file (gnncore, jax, flax, optax) that trains this run "
             "from the same initial weights and prints the same losses.")
    if _S.get("t_speed") not in SPEED_BY_NAME:
        _S.t_speed = DEFAULT_SPEED
    st.select_slider("Speed", [s.name for s in SPEEDS], key="t_speed", on_change=_set_speed,
                     args=(ws,), help="Slowest on the left. Slow motion trains one step "
                     "every half second, so a class can watch the loss move; a tick is one "
                     "redraw of the charts (about ten a second at most).")
    speed = _speed()
    ws.steps_per_tick = speed.steps_per_tick
    st.fragment(_live, run_every=speed.every_s if ws.playing else None)(ws, ws.play_token)

"""Diagnose panel: the verdict, the per-variable audit, the parameter-change
heatmap, compile versus run time, the race of every JIT mode, and where the
run's arrays live when it trains on several devices."""

from __future__ import annotations

import math

import streamlit as st

from explorer import plots
from explorer.engine import STEPPERS
from explorer.ui.common import data_frame, verdict_banner
from explorer.workspace import Workspace

_S = st.session_state


def _fmt(value: float, scale: float = 1.0, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "n/a"
    return f"{scale * value:.{digits}g}"


def _run_chart(ws: Workspace, key: str, build) -> None:
    """A chart of the run's steps. While training plays, the panel keeps the
    figure of the last page drawn before Play (its caption says the panels
    refresh on pause): a figure sent again unchanged is not redrawn, and each
    plotly redraw in the page that Play reruns delays the loss chart's first
    point by a sixth of a second or more on a 2-core machine."""
    figures = _S.setdefault("d_figures", {})
    if not (ws.playing and figures.get(key, (None,))[0] == ws.generation):
        figures[key] = (ws.generation, build())
    st.plotly_chart(figures[key][1], key=key, config={"displaylogo": False})


def _bytes(value: int | None) -> str:
    """``1.25 MB`` (``n/a`` for a figure the backend did not report)."""
    if value is None:
        return "n/a"
    for unit, size in (("GB", 2**30), ("MB", 2**20), ("kB", 2**10)):
        if abs(value) >= size:
            return f"{value / size:.3g} {unit}"
    return f"{value} B"


DONATION_HELP = ("What compiling the step with donate_argnums=(0,) saves of its peak memory: "
                 "XLA may then write the new state into the old state's buffers instead of "
                 "new ones (the old state cannot be read after the call). It applies where the "
                 "state is a jax.jit argument that the call returns replaced: the functional "
                 "and scan modes.")


def _memory(c: dict) -> None:
    """XLA's memory analysis of the compiled step, and what donating the state saves."""
    cols = st.columns(5)
    cols[0].metric("Arguments", _bytes(c.get("argument_bytes")),
                   help="What one call takes in: the parameters, optimizer state and RNG, "
                        "and the graph's arrays.")
    cols[1].metric("Outputs", _bytes(c.get("output_bytes")),
                   help="What one call returns (the new state, the loss, and in scan mode "
                        "each step's measurements).")
    cols[2].metric("Temporaries", _bytes(c.get("temp_bytes")),
                   help="XLA's scratch buffers inside the call: activations, gradients.")
    cols[3].metric("Peak", _bytes(c.get("peak_bytes")),
                   help="XLA's peak memory of one call (its memory analysis).")
    saves, note = c.get("donation_saves_bytes"), c.get("donation_note", "")
    if saves is None:
        cols[4].metric("Donation saves", "n/a", help=f"{note}. {DONATION_HELP}")
        if "ignores donation" in note:
            st.caption(note)
    else:
        cols[4].metric("Donation saves", _bytes(saves), help=(
            f"With the state donated the peak falls from {_bytes(c.get('peak_bytes'))} to "
            f"{_bytes(c.get('donated_peak_bytes'))}; {_bytes(c.get('donated_alias_bytes'))} of "
            f"outputs are written into the donated inputs. {DONATION_HELP}"))


def _audit(ws: Workspace) -> None:
    report = ws.audit()
    verdict_banner(report)
    if report is None:
        return
    st.caption(f"What changed between the initial state and step {ws.steps_done}: every "
               "variable of the model and the optimizer.")
    rows = [{"variable": c.path, "kind": c.kind, "changed": "yes" if c.changed else "NO",
             "‖Δ‖/‖θ‖": c.relative_change} for c in report.changes]
    st.dataframe(data_frame(rows), hide_index=True, width="stretch",
                 column_config={"‖Δ‖/‖θ‖": st.column_config.NumberColumn(format="%.3g")})


def _heatmap(ws: Workspace) -> None:
    st.caption("Relative change ‖Δ‖/‖θ‖ of every variable at every step (last 200 steps). "
               "A run that trains lights up the parameter rows in colour; in a frozen run "
               "every cell stays the pale 'no change' colour.")

    def figure():
        paths, kinds, steps, matrix = ws.change_matrix()
        labels = [f"{p}  ({k})" for p, k in zip(paths, kinds)]
        return plots.heatmap_figure(labels, matrix, steps=steps)

    _run_chart(ws, "d_heatmap", figure)


def _compile(ws: Workspace) -> None:
    info = ws.retrace_info()
    history = ws.run.history if ws.run else []
    first = next((r.call_wall_s for r in history if r.traced), math.nan)
    steady = ws.run.steady_step_ms(window=20) if ws.run else math.nan
    cols = st.columns(4)
    cols[0].metric("Traces", info["traces"], help="How often the step was traced (and "
                   "compiled). More than one means retraces.")
    ahead = ws.run.compiled_ahead if ws.run else {}
    if math.isnan(first) and ahead.get("traced"):  # the first call ran before Play
        first = ahead["seconds"]
        cols[1].metric("First call (ahead)", f"{_fmt(first)} s", help=(
            "Trace + compile + run of the step's first call, made in the background on "
            "copies of the modules once the page was drawn, so that Play did not wait for it."))
    else:
        cols[1].metric("First call", f"{_fmt(first)} s", help=(
            "Trace + compile + run. The app keeps compiled programs on disk (its compilation "
            "cache), so when this program was compiled before, the compile part is a read; "
            "'Measure trace / lower / compile' below always times XLA itself."))
    cols[2].metric("Steady step", f"{_fmt(steady)} ms", help="Median of the last 20 steps "
                   "that reused the compiled step (in scan mode: a call's time shared by its "
                   "K steps).")
    cols[3].metric("Compile / step", _fmt(first / (steady / 1e3), 1, 3),
                   help="How many steady steps one compilation costs.")
    _run_chart(ws, "d_step_time", lambda: plots.step_time_figure(
        [r.step for r in history], [r.wall_s for r in history],
        [r.trace_cause or "traced" if r.traced else "" for r in history]))
    if not ws.config.stepper.compiled:
        st.info("Eager mode compiles nothing: every operation is dispatched on its own, "
                "every step.")
    reused = [r for r in history if r.reused]
    with st.container():  # always there: the box coming and going shifts nothing below
        if reused:
            st.info(f"Step {reused[0].step} was due to trace but did not: "
                    f"{reused[0].reused}. The app compiles the step once the page is drawn, "
                    "before Play, and shares compiled steps between sessions (pure functions: "
                    "each session keeps its own weights and optimizer state). 'Measure trace "
                    "/ lower / compile' below times a fresh compile.", icon=":material/bolt:")
    if info["last_cause"]:
        st.write(f"Last trace at step {info['last_step']}: **{info['last_cause']}**.")
    if info.get("pending"):
        st.warning(f"The next step will retrace: {info['pending']}. Tick 'Bucket padding' "
                   "in the model panel to absorb small edits without recompiling.")
    if ws.config.stepper.compiled:
        if st.button("Measure trace / lower / compile", key="d_measure",
                     disabled=ws.run is None):
            with st.spinner("Tracing, lowering and compiling a fresh copy of the step…"):
                ws.measure_compile()
        c = ws.compile_info
        if c:
            st.plotly_chart(plots.timing_figure([{"mode": ws.config.mode, **c}], height=200),
                            key="d_timing", config={"displaylogo": False})
            compile_text = (f"read back from the compilation cache in {_fmt(c['compile_s'])} s "
                            "(this program was compiled before: XLA did not run)"
                            if c.get("compile_cached") else
                            f"XLA compile {_fmt(c['compile_s'])} s")
            st.caption(f"trace + lower {_fmt(c['trace_lower_s'])} s · {compile_text} · first "
                       f"call {_fmt(c['first_call_s'])} s · steady step "
                       f"{_fmt(c['steady_step_ms'])} ms (measured after {c['steps']} steps)")
            _memory(c)


def _race(ws: Workspace) -> None:
    st.caption("Every JIT mode from the same initial weights on the current graph. Their "
               "curves fall together; jax.jit stays flat.")
    cols = st.columns([1, 1, 2], vertical_alignment="bottom")
    steps = cols[0].number_input("Steps", min_value=2, max_value=500, value=30, key="d_steps")
    if cols[1].button("Race all modes", key="d_race", icon=":material/sports_score:",
                      type="primary", disabled=ws.arrays is None):
        bar = st.progress(0.0, text="Starting the race…")

        def progress(mode: str, done: int, total: int) -> None:
            text = f"Training {mode} ({done + 1} of {total})…" if mode else "Done."
            bar.progress(done / total, text=text)

        ws.start_race(int(steps), progress=progress)
        bar.empty()
    result = ws.race_result
    if not result:
        return
    curves = {e.label: list(e.losses) for e in result}
    st.plotly_chart(plots.race_figure(curves), key="d_race_chart",
                    config={"displaylogo": False})
    table = data_frame([{
        "mode": e.label, "trace + lower (s)": _fmt(e.trace_lower_s),
        "XLA compile (s)": _fmt(e.compile_s), "first call (s)": _fmt(e.first_call_s),
        "median step (ms)": _fmt(e.median_step_ms), "peak memory": _bytes(e.peak_bytes),
        "donation saves": _bytes(e.donation_saves_bytes),
        "final loss": _fmt(e.losses[-1] if e.losses else math.nan, digits=5),
        "params changed": f"{e.params_changed} of {e.params_total}",
        "verdict": e.verdict.upper()} for e in result])
    st.dataframe(table, hide_index=True, width="stretch", column_config={
        "peak memory": st.column_config.TextColumn(
            help="XLA's peak memory of one compiled call of the mode's step."),
        "donation saves": st.column_config.TextColumn(help=DONATION_HELP + " n/a elsewhere: "
                                                      "see the notes below the table.")})
    notes = {}
    for e in result:
        if e.donation_note:
            notes.setdefault(e.donation_note, []).append(e.label)
    for note, modes in notes.items():
        st.caption(f"Donation saves, {', '.join(modes)}: {note}.")
    st.plotly_chart(plots.timing_figure([e.row() for e in result]), key="d_race_timing",
                    config={"displaylogo": False})
    frozen = [e.label for e in result if e.verdict == "frozen"]
    if frozen:
        st.error(f"Frozen: {', '.join(frozen)} — {STEPPERS['jax.jit'].summary}",
                 icon=":material/ac_unit:")


def _devices(ws: Workspace) -> None:
    import jax

    from explorer.engine.sharding import AXIS

    run = ws.run
    devices = jax.devices()
    if run is None or run.mesh is None:
        st.caption(
            f"This run trains on one device ({devices[0].device_kind}, "
            f"{devices[0].platform.upper()}); {len(devices)} visible. "
            + ("Set *Devices* in the model panel to split the run over several: the inputs "
               "are split along the 'data' axis, the model is copied to each device, and "
               "XLA adds the communication." if len(devices) > 1 else
               "On a CPU, start the app with XLA_FLAGS=--xla_force_host_platform_device_count"
               "=4 to get 4 devices (sharing the same cores: this shows the splitting, not a "
               "speed-up)."))
        return
    mesh = run.mesh
    st.caption(f"Mesh: axis '{AXIS}' of {mesh.size} devices: "
               + ", ".join(f"{d.platform.upper()} {d.id}" for d in mesh.devices.flat)
               + f". An array split along 'data' keeps 1/{mesh.size} of its rows on each "
               "device; P() is a whole copy on each.")
    rows = run.layout()
    st.dataframe(data_frame([{
        "array": r["name"], "shape": " × ".join(map(str, r["shape"])) or "scalar",
        "sharding": r["spec"], "per device": " × ".join(map(str, r["shard"])) or "scalar",
        "bytes per device": _bytes(r["bytes_per_device"])} for r in rows]),
        hide_index=True, width="stretch", key="d_layout")


#: the Diagnose tabs in order, and what draws each
TABS = {"Verdict & audit": _audit, "Parameter changes": _heatmap, "Compile vs run": _compile,
        "Race": _race, "Devices": _devices}
TABS_KEY = "d_tabs"  # the open tab's label in session state


def render(ws: Workspace) -> None:
    st.header("Diagnose")
    if ws.playing:
        st.caption("Live training in progress: these panels refresh when you pause.")
    # Only the open tab is drawn (a click on another reruns the page): the first
    # page then holds no Plotly chart, and the browser loads Plotly's code (4.7 MB)
    # when a tab that has one is first opened, not before the page can be used.
    tabs = st.tabs(list(TABS), key=TABS_KEY, on_change="rerun")
    for tab, body in zip(tabs, TABS.values()):
        if tab.open:
            with tab:
                body(ws)

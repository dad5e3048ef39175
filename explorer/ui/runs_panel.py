"""Your runs: the run logs that ``explorer.watch`` and ``python -m explorer
check --log`` write, followed live while they grow.

Shown with the Diagnose panel's own figures and banner (the loss curve, the
verdict with its evidence, cause and fix, the parameter-change heatmap, and
the step time with the traces and their causes). Only runs directly under the
configured folder can be opened (``explorer.runlog.resolve_run``); a log can
also be uploaded. Everything read from a log is shown as text.
"""

from __future__ import annotations

import math
import time
from types import SimpleNamespace

import streamlit as st

from explorer import plots
from explorer.runlog import list_runs, read_run, read_upload, resolve_run, runs_dir
from explorer.ui.common import plain, verdict_banner

_S = st.session_state
LIVE_EVERY_S = 1.0  # how often a run that is still being written is read again
QUIET_S = 60.0  # a log unchanged this long is no longer followed


def render() -> None:
    st.title("Your runs")
    root = runs_dir()
    st.caption(f"Run logs under {plain(str(root.resolve()))}, written by `python -m explorer "
               "check --log DIR my_train.py` or by `explorer.watch(step, log_dir=DIR)`. Start "
               "the app with `-- --runs DIR` (or set EXPLORER_RUNS) to look elsewhere. A run "
               "that is still being written is followed live.")
    upload = st.file_uploader("Or open a run log from a file: a .zip of a run folder, or its "
                              "records.jsonl", type=["zip", "jsonl"], key="r_upload")
    if upload is not None:
        try:
            run = read_upload(upload.name, upload.getvalue())
        except ValueError as err:
            st.error(plain(str(err)), icon=":material/error:")
            return
        _show(run, live=False)
        return
    names = list_runs(root)
    if not names:
        st.info("No runs yet. Try: `python -m explorer check --log runs "
                "examples/frozen_jax_jit.py`, then reload this page.",
                icon=":material/info:")
        return
    name = st.selectbox("Run", names, key="r_pick", help="Newest first.")
    try:
        folder = resolve_run(root, name)
    except ValueError as err:
        st.error(plain(str(err)))
        return
    st.fragment(_follow, run_every=LIVE_EVERY_S)(folder)


def _follow(folder) -> None:
    """Read the run again (a fragment that reruns every second while the
    run is being written)."""
    run = read_run(folder)
    quiet = time.time() - folder.joinpath("records.jsonl").stat().st_mtime
    _show(run, live=run.final is None and quiet < QUIET_S)


def _show(run, *, live: bool) -> None:
    records = run.records
    state = ("being written: followed live" if live else
             "finished" if run.final is not None else "not written to for a minute")
    st.subheader(plain(run.name))
    step_name = run.meta.get("step", "")
    st.caption(f"{plain(str(step_name))} · {len(records)} recorded call(s) · {state}"
               + (f" · {run.skipped} unreadable line(s) skipped" if run.skipped else ""))
    verdict = run.verdict
    if verdict is not None:
        verdict_banner(SimpleNamespace(
            status=str(verdict.get("verdict", "")),
            evidence=tuple(str(e) for e in verdict.get("evidence", ())),
            cause=str(verdict.get("verdict_cause", "")), fix=str(verdict.get("fix", ""))))
    calls = [int(r.get("call", 0)) for r in records]
    losses = [r.get("loss") for r in records]
    cols = st.columns(2)
    with cols[0]:
        shown = [(c, v) for c, v in zip(calls, losses) if v is not None]
        st.plotly_chart(plots.loss_figure([c for c, _ in shown], [_number(v) for _, v in shown],
                                          title="Loss (recorded calls)", height=260),
                        key="r_loss", config={"displaylogo": False})
    with cols[1]:
        st.plotly_chart(plots.step_time_figure(
            calls, [_number(r.get("wall_s")) for r in records],
            [str(r.get("cause") or "traced") if r.get("traced") else "" for r in records]),
            key="r_time", config={"displaylogo": False})
    traces = [r for r in records if r.get("traced")]
    if traces:
        st.markdown("\n".join(f"- traced at call {int(r.get('call', 0))}: "
                              f"{plain(str(r.get('cause', '')))}" for r in traces[:10]))
    labels = [f"{plain(p)}  ({plain(k)})" for p, k in zip(run.paths, run.kinds)]
    compared = [i for i in range(run.changes.shape[1])
                if not all(math.isnan(v) for v in run.changes[:, i])]
    if labels and compared:
        st.caption("Relative change ‖Δ‖/‖θ‖ of every variable between recorded calls "
                   "(the first call has nothing to compare with).")
        compared = compared[-200:]
        st.plotly_chart(plots.heatmap_figure(labels, run.changes[:, compared],
                                             steps=[run.calls[i] for i in compared]),
                        key="r_heatmap", config={"displaylogo": False})


def _number(value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan

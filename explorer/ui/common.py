"""Helpers shared by the panels: the session's workspace, error guards and the
verdict banner."""

from __future__ import annotations

import logging

import streamlit as st

from explorer.audit import AuditReport
from explorer.workspace import Workspace

log = logging.getLogger("explorer.ui")


def workspace() -> Workspace:
    """This browser session's workspace (created on first use; never shared)."""
    if "workspace" not in st.session_state:
        st.session_state.workspace = Workspace()
    return st.session_state.workspace


def guard(name: str, render, *args) -> None:
    """Run a panel; an unexpected error becomes a message in that panel (and a
    log entry) instead of a traceback, and the rest of the page still renders."""
    try:
        render(*args)
    except Exception as err:  # st.rerun/st.stop are BaseExceptions and pass through
        log.exception("%s panel failed", name)
        st.error(f"The {name} panel hit an error: {type(err).__name__}: {err}. "
                 "Your graph and run are kept; Reset starts a fresh run.")


def set_error(key: str, message: str) -> None:
    st.session_state[f"error_{key}"] = message


def show_error(key: str) -> None:
    """Show (and keep showing) the last error stored under ``key``."""
    message = st.session_state.get(f"error_{key}")
    if message:
        st.error(message, icon=":material/warning:")


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


def verdict_banner(report: AuditReport | None, *, detail: bool = True) -> None:
    """TRAINING (green) or FROZEN (red) with the evidence, cause and fix."""
    if report is None:
        st.info("No steps yet: press **Step** or **Play** to audit the training step.")
        return
    v = report.verdict
    evidence = "; ".join(v.evidence)
    if v.status == "frozen":
        text = f"**FROZEN** — {evidence}."
        if detail:
            text += f"\n\n**Cause:** {v.cause}.\n\n**Fix:** {v.fix}."
        else:
            text += f"\n\n**Fix:** {v.fix}."
        st.error(text, icon=":material/ac_unit:")
    else:
        st.success(f"**TRAINING** — {evidence}.", icon=":material/check_circle:")

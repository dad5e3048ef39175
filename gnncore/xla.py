"""XLA settings gnncore asks for before JAX starts its CPU backend.

jax 0.10's CPU compiler hands reductions (a sum over the last axis, a bias
gradient, the log-sum-exp of a loss) to YNNPACK. In a profile of a GAT training
step on a 10k-node, 100k-edge graph those reductions took 37-44 ms of 126-141
ms, a quarter of the step, each over a few hundred thousand numbers
(``benchmarks/RESULTS.md``, "XLA's CPU reductions"). ``CPU_FLAGS`` turns that
one fusion type off; matrix products still go to the libraries.

Importing this module (``import gnncore`` does, first) calls
:func:`request_cpu_flags`: it appends each flag to
``XLA_FLAGS`` unless that variable already names the option (so a user's own
setting wins), and only for the jax versions it was measured with (XLA aborts
the process on a flag it does not know). It can only act before the backend
starts: import gnncore before the first JAX computation, or set ``XLA_FLAGS``
yourself.

:data:`REDUCTIONS_IN_XLA` says whether the flag is in force in this process;
code whose fastest form depends on it (the gradient of edge weights in
:mod:`gnncore.sparse`) reads it there.
"""

from __future__ import annotations

import os
import sys
from importlib import metadata

__all__ = ["CPU_FLAGS", "REDUCTIONS_IN_XLA", "TESTED_JAX", "reductions_in_xla",
           "request_cpu_flags"]

#: appended to ``XLA_FLAGS`` at import (see the module's docstring)
CPU_FLAGS = ("--xla_cpu_experimental_ynn_fusion_type=-reduce",)
#: the jax versions the flags were measured with (and are known to exist in)
TESTED_JAX = ("0.10.2",)
_FUSION_TYPE = CPU_FLAGS[0].split("=", 1)[0] + "="  # the option that flag sets


def request_cpu_flags(environ=None) -> bool:
    """Append :data:`CPU_FLAGS` to ``XLA_FLAGS`` in ``environ`` (default
    ``os.environ``). Returns True if the running process will use them: the
    backend has not started yet and jax is one of :data:`TESTED_JAX`."""
    env = os.environ if environ is None else environ
    if _jax_version() not in TESTED_JAX:
        return False
    flags = env.get("XLA_FLAGS", "")
    for flag in CPU_FLAGS:
        name = flag.split("=", 1)[0]
        if name not in flags:
            flags = f"{flags} {flag}".strip()
    env["XLA_FLAGS"] = flags
    return environ is not None or not _backend_started()


def _jax_version() -> str:
    """The installed jax's version, read without importing jax: ``import
    gnncore`` loads this module first and leaves JAX to the first module that
    computes with it (an app can draw its first page without JAX)."""
    jax = sys.modules.get("jax")
    if jax is not None and hasattr(jax, "__version__"):
        return jax.__version__
    try:
        return metadata.version("jax")
    except metadata.PackageNotFoundError:  # pragma: no cover - jax from a source tree
        return ""


def _backend_started() -> bool:
    """Whether this process's JAX backend has started (no JAX loaded: no)."""
    bridge = sys.modules.get("jax._src.xla_bridge")
    if bridge is None:
        return False
    return bool(bridge.backends_are_initialized())


def reductions_in_xla(flags: str) -> bool:
    """Whether an ``XLA_FLAGS`` string keeps reductions out of YNNPACK: its last
    ``--xla_cpu_experimental_ynn_fusion_type`` names ``-reduce``. Anything else
    (no such option, a value this does not know) counts as no."""
    values = [t[len(_FUSION_TYPE):] for t in flags.split() if t.startswith(_FUSION_TYPE)]
    return bool(values) and "-reduce" in values[-1].split(",")


_started = _backend_started()
_flags_before = os.environ.get("XLA_FLAGS", "")
request_cpu_flags()
#: True when this process's CPU backend compiles reductions in XLA's own loops
#: (gnncore's flag, or the user's own, was in ``XLA_FLAGS`` when it started)
REDUCTIONS_IN_XLA = reductions_in_xla(
    _flags_before if _started else os.environ.get("XLA_FLAGS", ""))

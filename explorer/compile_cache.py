"""JAX's persistent compilation cache, for the app: a compiled program is
written to disk once, and any later compile of the same program (another
session, another lesson, the next server run) reads it back instead of
running XLA again.

It is on for the app (``explorer/ui/script.py``) and off everywhere else
unless a caller turns it on. The directory is ``$EXPLORER_COMPILATION_CACHE``
when set, else ``$XDG_CACHE_HOME/gnn-jit-explorer/jax`` (``~/.cache/...``);
``EXPLORER_COMPILATION_CACHE=off`` keeps it off, so every compile is cold.

A program read from the cache still traces and lowers in Python: only the
XLA compile is skipped. Where the app shows a compile time, it says whether
XLA ran or the cache answered (:func:`hits`), so a fast "compile" is never
passed off as a fast compiler.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import threading
from pathlib import Path

from explorer.lazy import lazy

jax = lazy("jax")  # loaded by enable(): importing this module loads no JAX

__all__ = ["ENV", "cache_dir", "compile_cold", "enable", "enabled", "hits"]

ENV = "EXPLORER_COMPILATION_CACHE"
_OFF = {"off", "0", "false", "no", "none"}
_HIT = "/jax/compilation_cache/cache_hits"

log = logging.getLogger("explorer")
_lock = threading.Lock()
_local = threading.local()  # per thread: a session's script thread counts its own hits
_state: dict = {"dir": None}  # process-wide JAX config, no session data
_salts = itertools.count(1)  # process-wide: makes each cold compile's cache key unique


def cache_dir() -> Path | None:
    """Where the cache lives, or ``None`` when ``$EXPLORER_COMPILATION_CACHE``
    turns it off."""
    value = os.environ.get(ENV, "").strip()
    if value.lower() in _OFF and value:
        return None
    if value:
        return Path(value).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "gnn-jit-explorer" / "jax"


def enable() -> Path | None:
    """Turn the cache on for this process (once; later calls return the same
    directory). Every compiled program is cached, however fast it compiled
    (JAX's default skips those under a second, which is all of ours).
    Returns the directory, or ``None`` when it is off or cannot be created."""
    with _lock:
        if _state["dir"] is not None:
            return _state["dir"]
        path = cache_dir()
        if path is None:
            return None
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            log.warning("compilation cache off: cannot create %s (%s)", path, err)
            return None
        jax.config.update("jax_compilation_cache_dir", str(path))
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
        jax.monitoring.register_event_listener(_count)  # once: dir is set from here on
        _state["dir"] = path
        return path


def enabled() -> Path | None:
    """The cache's directory if this process turned it on, else ``None``."""
    return _state["dir"]


def hits() -> int:
    """How many compiles this thread has read from the cache so far (take the
    difference around a compile to know whether XLA ran)."""
    return getattr(_local, "hits", 0)


def _count(event: str, **kwargs) -> None:
    if event == _HIT:
        _local.hits = getattr(_local, "hits", 0) + 1


def compile_cold(lowered):
    """``lowered.compile()`` through XLA even when the cache holds the program
    (the compile-vs-run panel measures the compiler, and the live step has
    usually just written its program to the cache), and without adding an
    entry. Returns ``(compiled, cached)``; ``cached`` is True only if the cache
    answered after all (then the time measured is a read, and the caller says
    so).

    How: a debug option that does nothing unless XLA dumps its passes
    (``xla_dump_max_hlo_modules``; nothing is dumped) gets a value no other
    compile used, so the cache key is new, and the entry is not written
    (JAX's minimum compile time to write one is raised for this thread)."""
    if _state["dir"] is None:  # no cache: every compile is cold anyway
        return lowered.compile(), False
    options = {"xla_dump_max_hlo_modules": -1 - next(_salts)}
    try:  # JAX's thread-local setting (not re-exported publicly; pinned jax)
        from jax._src import config as jax_config

        no_write = jax_config.persistent_cache_min_compile_time_secs(float("inf"))
    except (ImportError, AttributeError):  # pragma: no cover - another jax
        no_write = contextlib.nullcontext()
    before = hits()
    with no_write:
        compiled = lowered.compile(compiler_options=options)
    return compiled, hits() > before

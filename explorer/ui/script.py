"""The script Streamlit runs: ``streamlit run streamlit_app.py`` in a checkout,
``gnn-jit-explorer app`` (which runs this file) when installed."""

import gc
import logging
import os
import sys

log = logging.getLogger(__name__)

#: Streamlit's runner settings the app needs. Set here, where both ways of
#: starting the app pass, not in ``.streamlit/config.toml``, which Streamlit
#: reads only from the directory it was started in: an installed package
#: (``gnn-jit-explorer app``) started anywhere else would run without them.
RUNNER_OPTIONS = {
    # Off: a click that reruns the page waits for the run in progress to reach
    # its next element (live training ends its tick after the step in flight:
    # explorer.ui.common.interaction_waiting) and then runs in the same thread.
    # On (Streamlit's default), the click started a second script thread at
    # once, whose callbacks and page ran beside a tick still training the same
    # run: after Pause the page showed step N while the run went on to N + 1
    # (CI saw one Step then show N + 2), and a Step pressed mid-tick could run
    # the model in two threads. Streamlit's docs name this race for apps that
    # change objects held in session state. Applied even when set by hand.
    "runner.fastReruns": False,
    # Off: Streamlit runs a full gc.collect() after every script run, each
    # live-training tick included; with JAX loaded that cost ~150 ms per tick
    # and halved the UI's training throughput (benchmarks/bench_ui.py
    # --compare-gc). Python's own generational collection still runs. A value
    # given by hand (a flag, a config file) wins.
    "runner.postScriptGC": False,
}
REQUIRED = frozenset({"runner.fastReruns"})


def apply_runner_options() -> None:
    """Set :data:`RUNNER_OPTIONS` in this Streamlit server. Streamlit reads them
    at every rerun request and after every run, so what a run sets holds for
    every request after it."""
    from streamlit import config

    for key, value in RUNNER_OPTIONS.items():
        if config.get_option(key) == value:
            continue
        if config.is_manually_set(key):
            if key not in REQUIRED:
                continue
            log.warning("%s=%s set by hand is overridden: the app needs %s", key,
                        config.get_option(key), value)
        config.set_option(key, value, where_defined="explorer.ui.script.RUNNER_OPTIONS")


def start() -> None:
    # One OpenBLAS thread, set before numpy loads: the app's arrays are small, and
    # OpenBLAS's spinning workers fought XLA and the browser for a 2-core machine's
    # cores (a 1 ms numpy comparison took 50-130 ms while a run trained).
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    # Streamlit asks once per process, at the first element, whether it runs in a
    # REPL (to print "use streamlit run"): a walk of the stack that looks up the
    # file of every loaded module, 0.16 s of the first page once JAX and Flax are
    # loaded. This file only runs under Streamlit's runner: the answer is no, so
    # the question is marked asked.
    from streamlit import delta_generator

    delta_generator._use_warning_has_been_displayed = True
    first = "explorer.ui.app" not in sys.modules
    if first:
        gc.disable()  # see _load_jax: the app's own modules are many objects too
    try:
        from explorer.startup import without_ipython

        with without_ipython():  # Flax's question needs no IPython here
            from explorer import lazy

            # The first page is drawn without JAX (explorer/lazy.py): it loads with
            # the first model, in the run the browser asks for once the page is up
            # (explorer.ui.common.build_pending). Once per process.
            lazy.when_loaded(_load_jax)
            from explorer.ui.app import main
    finally:
        if first:
            gc.freeze()
            gc.enable()
    apply_runner_options()  # every run (two lookups once set)
    main()


def _load_jax() -> None:
    """Load JAX, Flax, optax and gnncore's layers, once per server, before the
    first model is built; and turn the compilation cache on first, so that a program
    compiled once (any session, any lesson, an earlier server run) is read back
    from disk instead of compiled again (``EXPLORER_COMPILATION_CACHE=off``
    turns it off: explorer/compile_cache.py).

    They are over 200,000 tracked objects, and the cyclic collector walked them
    all again and again as they came (0.4 s of a new server's first page when
    they were imported before it); it is off while they load, and they are
    frozen after, out of every later collection's way (modules live as long as
    the server anyway)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        from explorer.startup import without_ipython

        with without_ipython():
            from explorer import compile_cache

            compile_cache.enable()
            # what the engine imports (this may run inside its import: by name)
            import flax.nnx  # noqa: F401
            import optax  # noqa: F401

            import gnncore.models  # noqa: F401  (the layers)
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


if __name__ == "__main__":
    start()

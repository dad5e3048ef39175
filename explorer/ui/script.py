"""The script Streamlit runs: ``streamlit run streamlit_app.py`` in a checkout,
``gnn-jit-explorer app`` (which runs this file) when installed."""

import gc
import os
import sys


def start() -> None:
    # One OpenBLAS thread, set before numpy loads: the app's arrays are small, and
    # OpenBLAS's spinning workers fought XLA and the browser for a 2-core machine's
    # cores (a 1 ms numpy comparison took 50-130 ms while a run trained).
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    first = "explorer.ui.app" not in sys.modules
    if first:
        # The first run imports JAX, Flax and the app: over 200,000 tracked objects, and
        # the cyclic collector walked them all again and again as they came (0.4 s
        # of the first page's wait). Off while they load; then they are frozen,
        # out of every later collection's way (module objects live as long as the
        # server anyway).
        gc.disable()
    try:
        from explorer import compile_cache

        # a program compiled once (any session, any lesson, an earlier server run) is
        # read back from disk instead of compiled again; EXPLORER_COMPILATION_CACHE=off
        # turns it off (explorer/compile_cache.py)
        compile_cache.enable()
        from explorer.ui.app import main
    finally:
        if first:
            gc.freeze()
            gc.enable()
    main()


if __name__ == "__main__":
    start()

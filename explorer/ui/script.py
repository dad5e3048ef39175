"""The script Streamlit runs: ``streamlit run streamlit_app.py`` in a checkout,
``gnn-jit-explorer app`` (which runs this file) when installed."""

import os


def start() -> None:
    # One OpenBLAS thread, set before numpy loads: the app's arrays are small, and
    # OpenBLAS's spinning workers fought XLA and the browser for a 2-core machine's
    # cores (a 1 ms numpy comparison took 50-130 ms while a run trained).
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    from explorer import compile_cache

    # a program compiled once (any session, any lesson, an earlier server run) is
    # read back from disk instead of compiled again; EXPLORER_COMPILATION_CACHE=off
    # turns it off (explorer/compile_cache.py)
    compile_cache.enable()
    from explorer.ui.app import main

    main()


if __name__ == "__main__":
    start()

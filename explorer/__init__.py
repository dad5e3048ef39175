"""GNN JIT Explorer: the app's engine (no streamlit here) and, in ``explorer.ui``,
its Streamlit views.

``explorer.watch(step, log_dir=None, every=1)`` wraps your own training step
(:mod:`explorer.watcher`); it is loaded on first use, so that importing a light
module of the package (e.g. :mod:`explorer.lessons` keys) does not load JAX.
"""

__all__ = ["watch"]


def __getattr__(name: str):
    if name == "watch":
        from explorer.watcher import watch

        return watch
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

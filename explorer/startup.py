"""What the app's and the CLI's processes do before they import JAX and Flax.

Flax (``flax.nnx.reprlib``) imports IPython at import time when it is installed,
only to ask whether an IPython shell is running. IPython is in many JAX users'
environments (Jupyter) and brings prompt_toolkit, jedi and pygments with it:
``import streamlit, explorer.ui.app`` took 2.48 s with it and 1.95 s without
(medians of five, benchmarks/RESULTS.md), in front of the app's first page. A
process that is not inside IPython gets the same answer without it.
"""

from __future__ import annotations

import contextlib
import sys


@contextlib.contextmanager
def without_ipython():
    """Inside this block, ``import IPython`` fails as if IPython were not
    installed, unless it is already imported (a process inside IPython or
    Jupyter keeps it). Afterwards it imports as usual: only what was imported
    inside the block saw it missing, and all that asks is "is a shell running"
    (no, in a process that had not imported IPython)."""
    if "IPython" in sys.modules:
        yield
        return
    sys.modules["IPython"] = None  # import machinery: raise ImportError
    try:
        yield
    finally:
        if "IPython" in sys.modules and sys.modules["IPython"] is None:
            del sys.modules["IPython"]

"""``gnn-jit-explorer``: the command an installed package puts on the PATH.

``gnn-jit-explorer app [STREAMLIT OPTIONS]`` starts the app (Streamlit on the
package's own script, ``explorer/ui/script.py``); every other command is
``python -m explorer``'s: ``check``, ``train``, ``compare``, ``audit``,
``export``, ``inspect``. Kept apart from :mod:`explorer.cli` so that ``app``
starts Streamlit without loading JAX first.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

USAGE = ("usage: gnn-jit-explorer {app,check,train,compare,audit,export,inspect} ...\n"
         "  app [STREAMLIT OPTIONS]   start the app in the browser (needs the [app] extra)\n"
         "  check SCRIPT [ARGS...]    run your training script and judge its jitted steps\n"
         "  train|compare|audit|export|inspect ...   see gnn-jit-explorer train --help")


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if argv else 2
    if argv[0] == "app":
        script = Path(__file__).resolve().parent / "ui" / "script.py"
        return subprocess.call([sys.executable, "-m", "streamlit", "run", str(script),
                                *argv[1:]])
    from explorer.startup import without_ipython

    with without_ipython():  # Flax's question needs no IPython here
        from explorer.cli import main as cli
    return cli(argv)


if __name__ == "__main__":
    sys.exit(main())

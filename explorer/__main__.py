import sys

from explorer.startup import without_ipython

with without_ipython():  # Flax's question needs no IPython here (explorer/startup.py)
    from explorer.cli import main

sys.exit(main())

"""Entry point: `streamlit run streamlit_app.py` (installed: `gnn-jit-explorer app`)."""

from explorer.ui.script import start

start()

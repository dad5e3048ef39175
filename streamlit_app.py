"""Entry point: `streamlit run streamlit_app.py`."""

from explorer.ui.app import main

main()

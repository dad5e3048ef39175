"""GNN JIT Explorer: the app's engine (no streamlit here) and, in ``explorer.ui``,
its Streamlit views."""

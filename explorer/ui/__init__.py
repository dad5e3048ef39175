"""Streamlit views: the only code in the project that imports streamlit."""

"""The peer of ``bench_start``: a bare Streamlit page with only the elements
the benchmark waits for on the app's page (the title, the model panel's
epochs input, the graph canvas's container, the step counter and Play), and
nothing else: no explorer, no JAX, no components. Its paint is what Streamlit
and the browser cost on this machine at this moment; the app's paint over it
is what the app costs."""

import streamlit as st

with st.sidebar:
    st.number_input("Steps per Play", 1, 10_000, 100, key="m_epochs")
st.title("GNN JIT Explorer")
with st.container(key="g_canvas", height=300, border=True):
    st.write("graph")
st.button("Play", key="t_play", type="primary")
st.text("Step 0 of 100")

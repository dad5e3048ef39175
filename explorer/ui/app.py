"""The Streamlit page. Until the full explorer UI lands it shows the title, what
the app is for, and a live check that gnncore runs a compiled forward pass."""

from __future__ import annotations

import streamlit as st

TITLE = "GNN JIT Explorer"


@st.cache_data(show_spinner=False)
def _library_check() -> dict:
    # Cached per process: it holds no model and no session state, only numbers.
    import jax
    import jax.numpy as jnp
    import networkx as nx
    from flax import nnx

    import gnncore

    graph = gnncore.from_networkx(nx.karate_club_graph(), weight_attr=None)
    x = jnp.eye(graph.num_nodes)
    model = gnncore.GCN(graph.num_nodes, 16, 2, rngs=nnx.Rngs(0))
    model.eval()
    out = nnx.jit(lambda m, x, e: m(x, e))(model, x, graph.edge_index)
    return {"nodes": graph.num_nodes, "edges": graph.num_edges,
            "output": tuple(out.shape), "backend": jax.default_backend(),
            "gnncore": gnncore.__version__}


def main() -> None:
    st.set_page_config(page_title=TITLE, page_icon="🕸️", layout="wide")
    st.title(TITLE)
    st.write(
        "Draw or load a graph, stack GNN layers, pick a JIT mode and train live — and "
        "see why a training step wrapped in `jax.jit` instead of `nnx.jit` silently "
        "never learns.")
    info = _library_check()
    st.caption(
        f"gnncore {info['gnncore']} on {info['backend']}: a 2-layer GCN compiled with "
        f"nnx.jit on Zachary's karate club ({info['nodes']} nodes, {info['edges']} "
        f"directed edges) → output shape {info['output']}.")
    st.info("The interactive explorer (graph editor, layer stack, JIT modes, live "
            "training and diagnostics) is being built on this library.")

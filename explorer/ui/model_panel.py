"""Model panel (sidebar): the layer stack, activation, regularisation,
optimizer, node features and seed. Any change starts a new run."""

from __future__ import annotations

import sys

import streamlit as st

from explorer.config import LAYER_AGGRS, LIMITS, LayerConfig, RunConfig
from explorer.engine.optimizers import OPTIMIZERS
from explorer.ui.common import plain, set_error, show_error
from explorer.workspace import Workspace
from gnncore import ACTIVATIONS, CONV_TYPES, NORMS, POOLS
from gnncore.registry import HEADED_KINDS

KIND_NAMES = {"gcn": "GCN", "gat": "GAT", "gatv2": "GATv2", "transformer": "Transformer",
              "sage": "GraphSAGE", "gin": "GIN", "graph": "GraphConv", "cheb": "ChebConv (K=2)",
              "sg": "SGConv (K=1)"}
LEARNING_RATES = (0.0001, 0.0003, 0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0)
MAX_LAYERS = LIMITS["layers"].high

_S = st.session_state


def _bounds(limit: str) -> dict:
    """A number widget's range: the config's own limits (explorer.config.LIMITS)."""
    bound = LIMITS[limit]
    cast = int if bound.integer else float
    return {"min_value": cast(bound.low), "max_value": cast(bound.high)}


def _load(cfg: RunConfig) -> None:
    """Write ``cfg`` into the widgets' state (before they are drawn)."""
    uids = []
    for layer in cfg.layers:
        uid = _new_uid()
        uids.append(uid)
        _S[f"m_{uid}_kind"] = layer.kind
        _S[f"m_{uid}_width"] = int(layer.width)
        _S[f"m_{uid}_heads"] = int(layer.options.get("heads", 1))
        _S[f"m_{uid}_aggr"] = str(layer.options.get("aggr", "mean"))
    _S.m_layers = uids
    for name in ("activation", "dropout", "batch_norm", "residual", "head", "optimizer",
                 "learning_rate", "weight_decay", "features", "seed", "epochs",
                 "train_per_class", "bucket_padding", "pool", "norm", "devices"):
        _S[f"m_{name}"] = getattr(cfg, name)
    _S.m_config = cfg


def _device_count() -> int:
    """JAX's device count; 1 while JAX is not loaded (a new server's first page,
    drawn before its first model: the Devices input comes with the model, on a
    machine that has more than one)."""
    jax = sys.modules.get("jax")
    return 1 if jax is None else jax.device_count()


def _new_uid() -> int:
    _S.m_next_uid = _S.get("m_next_uid", 0) + 1
    return _S.m_next_uid


def _add_layer() -> None:
    uid = _new_uid()
    if _S.m_layers:
        last = _S.m_layers[-1]
        for field, default in (("kind", "gcn"), ("width", 16), ("heads", 1), ("aggr", "mean")):
            _S[f"m_{uid}_{field}"] = _S.get(f"m_{last}_{field}", default)
        _S.m_layers = _S.m_layers[:-1] + [uid, last]  # a new hidden layer before the output
    else:
        _S[f"m_{uid}_kind"], _S[f"m_{uid}_width"] = "gcn", 16
        _S[f"m_{uid}_heads"], _S[f"m_{uid}_aggr"] = 1, "mean"
        _S.m_layers = [uid]


def _remove_layer(uid: int) -> None:
    _S.m_layers = [u for u in _S.m_layers if u != uid]


def _layers_from_widgets() -> tuple[LayerConfig, ...]:
    layers = []
    for uid in _S.m_layers:
        kind = _S[f"m_{uid}_kind"]
        options = {}
        if kind in HEADED_KINDS:
            options["heads"] = int(_S[f"m_{uid}_heads"])
        if kind == "sage":
            options["aggr"] = _S[f"m_{uid}_aggr"]
        layers.append(LayerConfig(kind, int(_S[f"m_{uid}_width"]), options))
    return tuple(layers)


def _layer_editor(ws: Workspace) -> None:
    uids = list(_S.m_layers)
    classes = max(ws.arrays.num_classes(), 2) if ws.arrays is not None else 2
    for i, uid in enumerate(uids):
        is_output = i == len(uids) - 1 and not (_S.m_head or ws.task.pooled)
        with st.container(border=True):
            top = st.columns([3, 1], vertical_alignment="bottom")
            top[0].selectbox(f"Layer {i + 1}" + (" (output)" if is_output else ""),
                             list(CONV_TYPES), key=f"m_{uid}_kind",
                             format_func=lambda k: KIND_NAMES.get(k, k))
            top[1].button("", icon=":material/delete:", key=f"m_{uid}_remove",
                          help="Remove this layer", on_click=_remove_layer, args=(uid,),
                          disabled=len(uids) == 1)
            cols = st.columns(2)
            if is_output:
                cols[0].markdown(f"Width **{classes}**", help="The output layer has one "
                                 "unit per class (tick 'Linear head' to change that).")
            else:
                cols[0].number_input("Width", **_bounds("width"), step=4,
                                     key=f"m_{uid}_width")
            kind = _S[f"m_{uid}_kind"]
            if kind in HEADED_KINDS:
                cols[1].number_input("Heads", **_bounds("heads"), key=f"m_{uid}_heads",
                                     help="Attention heads; hidden widths must divide by it.")
            elif kind == "sage":
                cols[1].selectbox("Aggregation", LAYER_AGGRS, key=f"m_{uid}_aggr")
    st.button("Add layer", key="m_add_layer", icon=":material/add:", on_click=_add_layer,
              disabled=len(uids) >= MAX_LAYERS)


def render(ws: Workspace) -> None:
    if _S.get("m_config") != ws.config:
        _load(ws.config)  # the config changed elsewhere (mode, preset, reset)
    st.header("Model")
    _layer_editor(ws)
    st.selectbox("Activation", list(ACTIVATIONS), key="m_activation")
    st.slider("Dropout", LIMITS["dropout"].low, LIMITS["dropout"].high, step=0.05,
              key="m_dropout")
    if ws.task.pooled:
        st.selectbox("Readout (pooling)", POOLS, key="m_pool",
                     help="How node embeddings become one vector per graph before the head.")
    cols = st.columns([2, 3], vertical_alignment="center")
    cols[0].checkbox("Norm", key="m_batch_norm", help="A norm after each hidden conv.")
    cols[1].selectbox("Norm kind", tuple(NORMS), key="m_norm",
                      disabled=not _S.m_batch_norm, label_visibility="collapsed",
                      format_func={"batch": "BatchNorm", "layer": "LayerNorm",
                                   "graph": "GraphNorm"}.get)
    st.checkbox("Residual", key="m_residual")
    st.checkbox("Linear head", key="m_head",
                help="Add a linear layer after the convs (the last conv keeps its width).")
    st.subheader("Optimizer")
    st.selectbox("Optimizer", tuple(OPTIMIZERS), key="m_optimizer", label_visibility="collapsed")
    if _S.m_learning_rate not in LEARNING_RATES:
        st.number_input("Learning rate", **_bounds("learning_rate"), format="%g",
                        key="m_learning_rate")
    else:
        st.select_slider("Learning rate", LEARNING_RATES, key="m_learning_rate")
    st.number_input("Weight decay", **_bounds("weight_decay"), step=5e-4, format="%.4f",
                    key="m_weight_decay")
    st.subheader("Data and run")
    features = tuple(f for f in ws.task.feature_kinds if f != "file" or ws.has_file_features)
    if _S.m_features not in features:
        _S.m_features = features[0]
    st.selectbox("Node features", features, key="m_features",
                 help="one_hot: node id (as wide as the graph); degree; degree_one_hot; "
                      "constant; gaussian noise; laplacian eigenvectors; file: the graph's "
                      "own features (Cora's words, an uploaded file's x). one_hot and "
                      "laplacian are refused above 5,000 nodes.")
    cols = st.columns(2)
    cols[0].number_input("Seed", **_bounds("seed"), key="m_seed")
    cols[1].number_input("Steps per Play", **_bounds("epochs"), key="m_epochs")
    if ws.task.editable:  # a dataset's graphs have a fixed split
        own_split = ws.file_data is not None and ws.file_data.split is not None
        st.number_input("Train nodes per class", **_bounds("train_per_class"),
                        key="m_train_per_class", disabled=own_split,
                        help="The graph's file brings its own train/val/test split, which "
                             "is used as it is." if own_split else
                        "Labelled training nodes per class; the rest are split half "
                        "validation, half test.")
    st.checkbox("Bucket padding", key="m_bucket_padding",
                     help="Pad nodes and edges to power-of-two buckets: editing the graph "
                          "within a bucket does not recompile.")
    available = _device_count()
    if available > 1 or ws.config.devices > 1:
        st.number_input("Devices", 1, max(available, ws.config.devices), key="m_devices",
                        help="Train on the first N devices: the inputs split along a 'data' "
                             "mesh axis, the model copied to each, XLA adding the "
                             "communication (Diagnose → Devices shows where each array "
                             "lives). Bucket padding makes every array divisible by 2, 4 "
                             "or 8.")
    try:
        config = ws.config.replace(
            layers=_layers_from_widgets(), activation=_S.m_activation,
            dropout=float(_S.m_dropout), batch_norm=bool(_S.m_batch_norm),
            residual=bool(_S.m_residual), head=bool(_S.m_head), optimizer=_S.m_optimizer,
            learning_rate=float(_S.m_learning_rate),
            weight_decay=float(_S.m_weight_decay), features=_S.m_features,
            seed=int(_S.m_seed), epochs=int(_S.m_epochs),
            # widgets drawn only for some tasks lose their state when hidden
            train_per_class=int(_S.get("m_train_per_class", ws.config.train_per_class)),
            bucket_padding=bool(_S.m_bucket_padding), pool=_S.get("m_pool", ws.config.pool),
            norm=_S.m_norm, devices=int(_S.get("m_devices", ws.config.devices)))
    except ValueError as err:
        set_error("model", str(err))
    else:
        set_error("model", "")
        if config != ws.config:
            ws.set_config(config)
        _S.m_config = ws.config
    show_error("model")
    if ws.run is None and ws.error:
        st.error(plain(ws.error))


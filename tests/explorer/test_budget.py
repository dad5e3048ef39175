"""The memory budget (explorer/budget.py): the estimate bounds the real
parameter count of built models, ordinary runs fit, and oversized ones are
refused with what to reduce before anything is built."""

import jax
import numpy as np
import pytest
from flax import nnx

from explorer.budget import MAX_ACTIVATIONS, MAX_PARAMS, check, estimate
from explorer.config import LayerConfig, RunConfig
from explorer.engine import build_model

CONFIGS = [
    RunConfig(),
    RunConfig(layers=(LayerConfig("gat", 16, {"heads": 4}), LayerConfig("gat", 8,
                                                                     {"heads": 2}))),
    RunConfig(layers=(LayerConfig("sage", 32, {"aggr": "max"}), LayerConfig("gin", 16),
                      LayerConfig("gcn", 8))),
    RunConfig(layers=(LayerConfig("transformer", 24, {"heads": 3}), LayerConfig("cheb", 16),
                      LayerConfig("graph", 16), LayerConfig("sg", 4))),
    RunConfig(layers=(LayerConfig("gatv2", 16, {"heads": 2}),), head=True),
    RunConfig(graph="triangle", features="degree", layers=(LayerConfig("gin", 32),)),
]


def _params(model) -> int:
    return sum(int(np.prod(x.shape)) for x in jax.tree.leaves(nnx.state(model, nnx.Param)))


@pytest.mark.parametrize("config", CONFIGS)
def test_the_estimate_bounds_the_real_parameter_count(config):
    in_features, classes = 37, 5
    real = _params(build_model(config, in_features, classes))
    size = estimate(config, nodes=100, edges=400, in_features=in_features, classes=classes)
    assert real <= size.params <= 4 * real + 200, (real, size.params)


def test_the_activation_estimate_grows_with_the_graph_and_the_width():
    small = estimate(RunConfig(), nodes=100, edges=300, in_features=10, classes=3)
    wide = estimate(RunConfig(layers=(LayerConfig("gcn", 64), LayerConfig("gcn", 16))),
                    nodes=100, edges=300, in_features=10, classes=3)
    big = estimate(RunConfig(), nodes=10_000, edges=30_000, in_features=10, classes=3)
    assert small.activations < wide.activations and small.activations < big.activations
    assert big.activations >= 3 * 10_000 * 16  # at least the hidden rows, kept 3 times


@pytest.mark.parametrize("config, nodes, edges, features, classes", [
    (RunConfig(graph="cora", features="file"), 2708, 10556, 1433, 7),  # Kipf & Welling
    (RunConfig(layers=tuple(LayerConfig("gat", 1024, {"heads": 8}) for _ in range(8))),
     34, 156, 34, 2),  # the widest stack the limits allow, on karate
    (RunConfig(layers=(LayerConfig("gcn", 64), LayerConfig("gcn", 16))), 50_000, 500_000,
     64, 10),  # a big upload, an ordinary model
    (RunConfig(), 50_000, 1_000_000, 64, 64),  # the largest upload the loaders take (500,000
    # undirected edges, 64 classes) with the default model
    (RunConfig(graph="cora", features="file",
               layers=(LayerConfig("gat", 64, {"heads": 8}), LayerConfig("gat", 7))),
     2708, 10556, 1433, 7),  # the GAT paper's Cora model
])
def test_ordinary_runs_fit(config, nodes, edges, features, classes):
    size = check(config, nodes=nodes, edges=edges, in_features=features, classes=classes)
    assert size.params <= MAX_PARAMS and size.activations <= MAX_ACTIVATIONS


def test_a_wide_attention_stack_on_a_big_graph_is_refused_naming_what_to_reduce():
    config = RunConfig(layers=tuple(LayerConfig("gat", 1024, {"heads": 8}) for _ in range(8)))
    with pytest.raises(ValueError) as err:
        check(config, nodes=50_000, edges=400_000, in_features=64, classes=10)
    message = str(err.value)
    assert "too big for the server" in message and "billion" in message
    assert "8 layers" in message and "width 1024, 8 heads" in message
    assert "reduce the widths, the heads or the number of layers" in message


def test_too_many_weights_are_refused():
    config = RunConfig(layers=(LayerConfig("transformer", 1024, {"heads": 8}),
                               LayerConfig("gcn", 16)))
    with pytest.raises(ValueError, match=r"about \d+ million weights .* 10,000 input features"):
        check(config, nodes=100, edges=200, in_features=10_000, classes=3)


def test_a_run_over_the_budget_is_refused_before_its_model_is_built(monkeypatch):
    import explorer.engine as engine
    from explorer.engine import Run
    from explorer.workspace import Workspace

    def never(*args, **kwargs):
        raise AssertionError("the model was built")

    monkeypatch.setattr(engine, "build_model", never)
    wide = RunConfig(graph="cora", features="file",
                     layers=tuple(LayerConfig("gat", 1024, {"heads": 8}) for _ in range(8)))
    with pytest.raises(ValueError, match="too big for the server"):
        Run(wide)
    ws = Workspace(wide)  # the workspace keeps going and says why
    assert ws.run is None and ws.error.startswith("cannot build the model: this model is too "
                                                  "big for the server")

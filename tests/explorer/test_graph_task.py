"""Graph classification end to end: the engine trains a pooled model on a
padded batch of a dataset in every JIT mode, with the same audit and race;
the workspace offers the datasets (the app: ``tests/app/test_app_datasets.py``)."""

import numpy as np
import pytest

from explorer.config import LayerConfig, RunConfig
from explorer.engine import STEPPERS, GraphTask, NodeTask, Run
from explorer.race import race
from explorer.sources import GRAPH_TASKS
from explorer.workspace import Workspace

GIN = (LayerConfig("gin", 32), LayerConfig("gin", 32))


def _config(**kw):
    base = dict(graph="triangle", features="degree_one_hot", layers=GIN, dropout=0.0,
                pool="sum")
    base.update(kw)
    return RunConfig(**base)


def test_config_checks_features_and_pool_for_datasets():
    with pytest.raises(ValueError, match="config field 'features'.*graph-classification"):
        RunConfig(graph="triangle", features="one_hot")
    with pytest.raises(ValueError, match="config field 'pool'"):
        RunConfig(pool="median")
    assert _config().task is GraphTask and RunConfig().task is NodeTask
    assert RunConfig.from_json(_config().to_json()) == _config()


@pytest.mark.parametrize("mode", list(STEPPERS))
def test_every_mode_steps_on_a_dataset(mode):
    run = Run(_config(mode=mode))
    assert isinstance(run.task, GraphTask) and run.logits().shape == (120, 2)
    for _ in range(3):
        record = run.step()
    assert np.isfinite(record.loss) and 0 <= record.test_acc <= 1
    status = run.audit().verdict.status
    assert status == ("frozen" if mode == "jax.jit" else "training")
    if mode != "eager":
        assert run.trace_count == 1 and run.compile_breakdown()["compile_s"] > 0


@pytest.mark.parametrize("task", sorted(GRAPH_TASKS))
def test_pooled_gin_learns_each_dataset(task):
    run = Run(_config(graph=task, learning_rate=0.01))
    run.train(150)
    accs = run.accuracies()
    assert accs["train"] >= 0.9 and accs["test"] >= 0.8, accs


def test_split_and_padding_slots_stay_out_of_the_loss():
    run = Run(_config())
    train, val, test = run.task.split
    assert (train.sum(), val.sum(), test.sum()) == (72, 24, 24)
    assert not np.any(train & val) and not np.any(train & test)
    b = run.task.batch_data
    assert b.num_graphs > 120 and b.num_real_graphs() == 120
    mask = np.asarray(run.inputs.train_mask)
    assert mask.sum() == 72 and not mask[120:].any()  # padding graph slots never train


def test_a_dataset_takes_no_graph_and_cannot_be_edited():
    run = Run(_config())
    with pytest.raises(ValueError, match="cannot be edited"):
        run.set_graph(run.graph)
    with pytest.raises(ValueError, match="takes no graph"):
        Run(_config(), graph=run.graph)


def test_race_on_a_dataset():
    entries = race(_config(), steps=3)
    verdicts = {e.mode: e.verdict for e in entries}
    assert verdicts["jax.jit"] == "frozen"
    assert all(v == "training" for m, v in verdicts.items() if m != "jax.jit")
    first = {round(e.losses[0], 5) for e in entries}
    assert len(first) == 1  # same initial weights


def test_workspace_switches_between_datasets_and_graphs():
    ws = Workspace()
    ws.load_preset("cycle_vs_tree")
    assert ws.task is GraphTask and ws.config.features == "degree_one_hot"
    assert ws.drawing.num_nodes == ws.run.task.graphs[0].num_nodes
    ws.step()
    table = ws.graph_table()
    assert len(table) == 120 and {r["split"] for r in table} == {"train", "val", "test"}
    assert all(r["correct"] == (r["label"] == r["predicted"]) for r in table)
    ws.show_sample(7)
    assert ws.sample == 7 and set(ws.splits()) == {ws.graph_split(7)}
    with pytest.raises(ValueError, match="not edited"):
        ws.add_node()
    ws.load_preset("karate")
    assert ws.task is NodeTask and ws.stats().nodes == 34


@pytest.mark.parametrize("norm", ["graph", "layer", "batch"])
def test_norm_kinds_train_on_a_dataset_and_on_a_graph(norm):
    for config in (_config(batch_norm=True, norm=norm), RunConfig(batch_norm=True, norm=norm)):
        run = Run(config)
        losses = [run.step().loss for _ in range(3)]
        assert np.all(np.isfinite(losses)) and losses[-1] < losses[0]
        report = run.audit()
        assert report.verdict.status == "training"
        assert report.has_batch_norm == (norm == "batch")
    with pytest.raises(ValueError, match="config field 'norm'"):
        RunConfig(norm="group")

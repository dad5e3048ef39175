"""RunConfig: JSON round trip and field-naming validation."""

import json

import pytest

from explorer.config import LayerConfig, RunConfig


def test_round_trip_through_plain_json():
    config = RunConfig(layers=(LayerConfig("gat", 8, {"heads": 2}), LayerConfig("gcn", 4)),
                       mode="functional", seed=7, dropout=0.25, batch_norm=True)
    data = json.loads(config.to_json())
    assert data["layers"][0] == {"kind": "gat", "width": 8, "options": {"heads": 2}}
    assert RunConfig.from_dict(data) == config
    assert RunConfig.from_json(config.to_json()) == config


@pytest.mark.parametrize("data, field", [
    ({"mode": "jit"}, "mode"),
    ({"seed": -1}, "seed"),
    ({"seed": "1"}, "seed"),
    ({"dropout": 1.5}, "dropout"),
    ({"learning_rate": 0}, "learning_rate"),
    ({"batch_norm": 1}, "batch_norm"),
    ({"optimizer": "rmsprop"}, "optimizer"),
    ({"layers": []}, "layers"),
    ({"layers": [{"kind": "dense"}]}, "layers[0].kind"),
    ({"layers": [{"kind": "gcn", "width": 0}]}, "layers[0].width"),
    ({"layers": [{"kind": "gcn", "width": 2.5}]}, "layers[0].width"),
    ({"layers": [{"kind": "gcn", "depth": 2}]}, "layers[0].depth"),
    ({"colour": "red"}, "colour"),
    ({"graph": "mars"}, "graph"),
    ({"difficulty": 2}, "difficulty"),
    ({"features": "colour"}, "features"),
    ({"epochs": 10**9}, "epochs"),
    ({"scan_steps": 0}, "scan_steps"),
    ({"scan_steps": 1001}, "scan_steps"),
    ({"scan_steps": 2.5}, "scan_steps"),
])
def test_bad_fields_are_named(data, field):
    with pytest.raises(ValueError, match=f"config field '{field}'".replace("[", "\\[")
                       .replace("]", "\\]")):
        RunConfig.from_dict(data)


def test_bad_json():
    with pytest.raises(ValueError, match="not valid JSON"):
        RunConfig.from_json("{mode: 1")
    with pytest.raises(ValueError, match="JSON object"):
        RunConfig.from_dict([1, 2])


def test_scan_steps_default_and_round_trip():
    assert RunConfig().scan_steps == 10
    config = RunConfig(mode="scan", scan_steps=1000)
    assert RunConfig.from_json(config.to_json()) == config
    assert RunConfig(scan_steps=1).scan_steps == 1

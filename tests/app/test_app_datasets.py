"""Graph classification in the app (AppTest): it offers the datasets with
per-graph predictions and goes from a dataset back to a graph without losing
widgets. The engine side is tested in ``tests/explorer/test_graph_task.py``."""

from conftest import REPO
from streamlit.testing.v1 import AppTest

from explorer.engine import NodeTask


def test_app_offers_datasets_with_per_graph_predictions():
    at = AppTest.from_file(str(REPO / "streamlit_app.py"), default_timeout=120).run()
    at.selectbox(key="g_preset").set_value("triangle").run()
    assert not at.exception, at.exception
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Graphs"] == "120" and metrics["Classes"] == "2"
    at.button(key="t_step").click().run()
    at.button(key="t_step").click().run()
    assert not at.exception, at.exception
    assert "TRAINING" in " ".join(s.value for s in at.success)
    table = at.dataframe[0].value
    assert len(table) == 120 and {"label", "predicted", "split"} <= set(table.columns)
    at.radio(key="g_colour").set_value("embedding").run()
    assert not at.exception, at.exception
    ws = at.session_state["workspace"]
    at.number_input(key=f"g_sample_{ws.revision}").set_value(3).run()
    assert ws.sample == 3
    at.radio(key="t_mode").set_value("jax.jit").run()
    at.button(key="t_step").click().run()
    at.button(key="t_step").click().run()
    assert "FROZEN" in " ".join(e.value for e in at.error)


def test_app_goes_from_a_dataset_back_to_a_graph_without_losing_widgets():
    at = AppTest.from_file(str(REPO / "streamlit_app.py"), default_timeout=120).run()
    at.selectbox(key="g_preset").set_value("cycle_vs_tree").run()
    at.selectbox(key="m_pool").set_value("max").run()
    at.selectbox(key="g_preset").set_value("karate").run()  # pool/train-per-class now hidden
    at.run()
    at.button(key="m_add_layer").click().run()
    at.button(key="t_step").click().run()
    errors = " ".join(e.value for e in at.error)
    assert not at.exception and "panel hit an error" not in errors, errors
    ws = at.session_state["workspace"]
    assert ws.task is NodeTask and len(ws.config.layers) == 3 and ws.steps_done == 1

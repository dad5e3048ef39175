"""The Streamlit entry point runs and shows its title (AppTest, no browser)."""

from conftest import REPO
from streamlit.testing.v1 import AppTest


def test_app_starts_and_shows_title():
    at = AppTest.from_file(str(REPO / "streamlit_app.py"), default_timeout=120)
    at.run()
    assert not at.exception, at.exception
    assert [t.value for t in at.title] == ["GNN JIT Explorer"]
    # The caption reports a real compiled forward pass of gnncore.
    assert any("karate club (34 nodes, 156 directed edges)" in c.value for c in at.caption)

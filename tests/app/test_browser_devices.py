"""A run on two devices in a real browser: the app server starts with two
forced CPU devices (XLA_FLAGS, before JAX starts), a link asks for both, a
Step trains on them, the Devices tab (clicked) shows the mesh and the split
arrays, and typing 1 into the model panel's Devices input puts the run back
on one device."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect
from test_browser import STEP_MS, click, expect_steps, serve, set_number, shoot


@pytest.fixture(scope="module")
def two_devices():
    # XLA's default optimisations, as users run the app: one browser test in
    # CI drives that path (the others compile faster: conftest.app_environ)
    with serve(as_users_run_it=True,
               XLA_FLAGS="--xla_force_host_platform_device_count=2") as running:
        yield running


def test_a_run_on_two_devices_shows_its_mesh_and_goes_back_to_one(two_devices):
    context, page = two_devices.session("?devices=2&bucket_padding=1")
    try:
        click(page, "t_step")
        expect_steps(page, 1, 120_000)
        tab = page.get_by_role("tab", name="Devices", exact=True)
        tab.scroll_into_view_if_needed()
        tab.click()
        panel = page.locator('[role="tabpanel"]:visible')
        expect(panel, "the Devices tab shows no mesh").to_contain_text(
            "Mesh: axis 'data' of 2 devices: CPU 0, CPU 1", timeout=STEP_MS)
        table = panel.locator('[data-testid="stDataFrame"]')
        expect(table, "the layout table is missing").to_have_count(1, timeout=STEP_MS)
        shoot(panel, "devices_tab.png")
        set_number(page, "m_devices", 1)
        expect(panel, "the run did not go back to one device").to_contain_text(
            "This run trains on one device", timeout=STEP_MS)
        expect_steps(page, 0)  # a new run
    finally:
        context.close()

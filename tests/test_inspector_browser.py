"""The web inspector in a real browser: Debian's headless Chromium (installed by the tests when
missing), driven by Playwright. Every page is loaded, a recall is typed and submitted, the
diagrams must be drawn by the bundled Mermaid with the states where flows stand marked, and
each page passes the accessibility basics (labels, landmarks, contrast). Screenshots are saved
as test artifacts under ``$MNEMON_SM_ARTIFACTS`` (default ``build/test-artifacts``)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, ConsoleMessage, Page, sync_playwright

from mnemon_sm.engine.spec import flow_names
from mnemon_sm.inspector import Running, open_read_only
from mnemon_sm.testing.browser import ACCESSIBILITY_JS, FLAGS, chromium_path
from tests.test_inspector import CONFIG, HOSTILE, died_in_a_step, seed, tree

ARTIFACTS = Path(os.environ.get("MNEMON_SM_ARTIFACTS", "build/test-artifacts")) / "inspector"
PAGES = (
    ("/", "Hot memory", "hot-memory"),
    ("/recall", "Recall", "recall"),
    ("/spaces", "Spaces", "spaces"),
    ("/documents", "Documents", "documents"),
    ("/agents", "Agents", "agents"),
    ("/flows", "Live flows", "live-flows"),
)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    path = seed(tmp_path_factory.mktemp("browser") / "root")
    died_in_a_step(path)
    root = open_read_only(path, CONFIG)
    try:
        with Running(root) as running:
            yield running.url, path
    finally:
        root.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    executable = chromium_path()
    with sync_playwright() as p:
        found = p.chromium.launch(executable_path=executable, headless=True, args=list(FLAGS))
        try:
            yield found
        finally:
            found.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[tuple[Page, list[str]]]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    found = context.new_page()
    errors: list[str] = []

    def console(message: ConsoleMessage) -> None:
        if message.type in ("error", "warning"):
            errors.append(f"{message.type}: {message.text}")

    found.on("console", console)
    found.on("pageerror", lambda exc: errors.append(f"page error: {exc}"))
    try:
        yield found, errors
    finally:
        context.close()


def shoot(page: Page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"))


def accessible(page: Page) -> None:
    found: dict[str, Any] = page.evaluate(ACCESSIBILITY_JS)
    assert found["problems"] == [], (page.url, found["problems"])
    assert found["checked"] > 5, page.url  # the check saw the page's text


@pytest.mark.parametrize(("path", "title", "name"), PAGES)
def test_every_page_loads_and_passes_the_accessibility_basics(
    served: tuple[str, Path], page: tuple[Page, list[str]], path: str, title: str, name: str
) -> None:
    url, _ = served
    tab, errors = page
    response = tab.goto(url + path)
    assert response is not None and response.status == 200
    assert tab.title() == f"{title} · mnemon-sm inspector"
    assert tab.locator("h1").inner_text() == title
    current = tab.locator('nav a[aria-current="page"]')
    assert current.count() == 1 and current.inner_text() == title
    accessible(tab)
    shoot(tab, name)
    assert errors == []


def test_markup_in_an_entry_is_text_in_the_browser(
    served: tuple[str, Path], page: tuple[Page, list[str]]
) -> None:
    url, _ = served
    tab, errors = page
    alerts: list[str] = []
    tab.on("dialog", lambda dialog: (alerts.append(dialog.message), dialog.dismiss()))
    tab.goto(url + "/")
    assert tab.get_by_text(HOSTILE, exact=True).count() == 1
    assert alerts == [] and errors == []


def test_a_recall_typed_and_submitted_shows_ranked_results(
    served: tuple[str, Path], page: tuple[Page, list[str]]
) -> None:
    url, _ = served
    tab, errors = page
    tab.goto(url + "/recall")
    tab.get_by_label("Query").fill("staging deploys")
    tab.get_by_label("Results").select_option("25")
    tab.get_by_role("button", name="Recall").click()
    tab.wait_for_url("**/recall?q=staging+deploys*")
    results = tab.get_by_role("table", name="Results, best first")
    rows = results.locator("tbody tr")
    assert rows.count() >= 1
    assert "VPN" in rows.first.inner_text()
    scores = [float(rows.nth(i).locator("td").nth(1).inner_text()) for i in range(rows.count())]
    assert scores == sorted(scores, reverse=True)
    accessible(tab)
    shoot(tab, "recall-results")
    rows.first.get_by_role("link").click()  # its related graph
    tab.wait_for_selector('body[data-diagrams="ready"]', timeout=20_000)
    assert tab.locator("figure svg").count() == 1
    assert tab.locator("figure svg .node").count() >= 2
    accessible(tab)
    shoot(tab, "related-graph")
    assert errors == []


@pytest.mark.parametrize("flow", flow_names())
def test_each_flow_diagram_is_drawn_with_the_states_where_flows_stand(
    served: tuple[str, Path], page: tuple[Page, list[str]], flow: str
) -> None:
    url, _ = served
    tab, errors = page
    tab.goto(f"{url}/flows/{flow}")
    tab.wait_for_selector("body[data-diagrams]", timeout=20_000)
    assert tab.locator("body").get_attribute("data-diagrams") == "ready"
    svg = tab.locator("figure svg")
    assert svg.count() == 1
    if flow == "document_mutation":  # the dead process's state is marked in flight
        busy = svg.locator("g.busy")
        assert busy.count() == 1 and "planning" in (busy.get_attribute("id") or "")
        shoot(tab, "flow-document-mutation")
    if flow == "hot_memory_mutation":  # the demo ended it at rest
        assert svg.locator("g.resting").count() >= 1
        shoot(tab, "flow-hot-memory-mutation")
    accessible(tab)
    assert errors == []


def test_a_visit_of_every_page_in_the_browser_writes_nothing(
    served: tuple[str, Path], page: tuple[Page, list[str]]
) -> None:
    url, path = served
    tab, _ = page
    before = tree(path)
    for href, _, _ in PAGES:
        tab.goto(url + href)
    tab.goto(url + "/recall?q=deploy+script")
    tab.goto(url + "/flows/recall")
    tab.wait_for_selector("body[data-diagrams]", timeout=20_000)
    assert tree(path) == before

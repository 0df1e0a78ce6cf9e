"""The Dagster UI in a real browser: headless Chromium (Debian's `chromium`, driven by playwright)
against `lcp ui` on a tiny project.

It checks that the asset graph shows every asset the webserver knows, then does what a user
does: opens `source_documents`, launches a materialization of its `demo` partition from the
Materialize dialog, follows the run to Success, and checks the partition landed in the lake.
It also opens the `leaderboard` materialization's score-vs-length plot (inline PNG metadata) and
checks the browser draws it. Screenshots go to ``$LCP_TEST_ARTIFACTS/e2e`` (default
``tests/artifacts/e2e``, git-ignored).
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest
from conftest import REPO, free_port
from ui_process import graphql, serving, start_ui, stop_ui

CHROMIUM = os.environ.get("LCP_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (Debian: apt-get install chromium; "
                                                "or set LCP_CHROMIUM); the browser test needs a real browser"),
]
playwright_api = pytest.importorskip("playwright.sync_api", reason="playwright (dev extra) is not installed")

ARTIFACTS = Path(os.environ.get("LCP_TEST_ARTIFACTS") or REPO / "tests" / "artifacts") / "e2e"
RUN_S = 300  # queued -> daemon dequeues -> subprocess run of the demo corpus source
UI_S = 60  # one UI element to appear
MODEL = "smollm2-135m"


def materialize_leaderboard(repo: Path, env: dict[str, str], instance) -> None:
    """The leaderboard asset, run in process into the UI's instance, over long_scores computed by the
    pipeline's own LongScore code from generated scores (generation itself is covered by the asset tests)."""
    import dagster as dg
    import polars as pl

    from lc_pipeline.definitions import build_pipeline
    from lc_pipeline.resources.parquet_io import partition_path, write_parquet_atomic
    from lc_pipeline.score.longscore import long_scores_frame
    from lc_pipeline.settings import Settings

    scores = pl.DataFrame({"task": ["qa"] * 4, "length": ["1k", "1k", "2k", "2k"], "score": [1.0, 1.0, 1.0, 0.0]})
    lake = Path(env["LCP_LAKE"])
    write_parquet_atomic(long_scores_frame(scores, ["1k"], ["2k"], metric="subem"),
                         partition_path(lake, "long_scores", {"model": MODEL}))
    instance.add_dynamic_partitions("model", [MODEL])
    pipeline = build_pipeline(Settings(project_dir=repo, config=env["LCP_CONFIG"], lake_dir=lake,
                                       models_file=Path(env["LCP_MODELS"]), dagster_home=Path(env["DAGSTER_HOME"])))
    result = dg.materialize(pipeline.assets, selection=["leaderboard"], resources=pipeline.resources,
                            instance=instance)
    assert result.success


@pytest.fixture(scope="module")
def project_env(tmp_path_factory, tiny_config_file) -> dict[str, str]:
    """As conftest's project_env, for one server shared by this module's tests."""
    root = tmp_path_factory.mktemp("e2e")
    (root / ".dagster").mkdir()
    return dict(os.environ, LCP_CONFIG=str(tiny_config_file), LCP_LAKE=str(root / "data_lake"),
                LCP_MODELS=str(root / "models.yaml"), DAGSTER_HOME=str(root / ".dagster"), LCP_PROJECT_DIR=str(REPO))


@pytest.fixture(scope="module")
def ui(repo, project_env):
    """`lcp ui` on the tiny project; yields (port, env). The `demo` source partition exists up front
    (the daemon's sensor would add it only on its first tick), and `leaderboard` has a materialization."""
    import dagster as dg

    home = Path(project_env["DAGSTER_HOME"])
    shutil.copyfile(repo / "dagster.yaml", home / "dagster.yaml")
    with dg.DagsterInstance.from_config(str(home)) as instance:
        instance.add_dynamic_partitions("source", ["demo"])
        materialize_leaderboard(repo, project_env, instance)
    port, log = free_port(), home / "ui.log"
    proc = start_ui(["ui", "--port", str(port)], repo, project_env, log)
    try:
        serving(port, proc, log)
        # The "join the community" dialog would cover the page on 127.0.0.1; mark it seen, as its Skip does.
        graphql(port, "mutation { setNuxSeen }")
        yield port, project_env
    finally:
        stop_ui(proc)


@pytest.fixture
def page():
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with playwright_api.sync_playwright() as p:
        # --no-sandbox: CI containers run as root, where Chromium's sandbox cannot start.
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        try:
            pg = browser.new_page(viewport={"width": 1800, "height": 1600})  # the whole graph, 12 groups, in view
            pg.set_default_timeout(UI_S * 1000)
            yield pg
        finally:
            browser.close()


def shows(label: str, name: str) -> bool:
    """The UI middle-truncates long node labels ("minilongbe…_subset")."""
    if "…" not in label:
        return label == name
    head, tail = label.split("…", 1)
    return name.startswith(head) and name.endswith(tail) and len(name) > len(head) + len(tail)


def graph_labels(pg) -> set[str]:
    """Leaf texts to the right of the side bar, i.e. inside the graph."""
    box = pg.get_by_placeholder("Jump to…").bounding_box()
    return set(pg.evaluate(
        """(x) => [...document.querySelectorAll('div, span')]
             .filter(e => e.childElementCount === 0 && e.getBoundingClientRect().left > x)
             .map(e => e.textContent.trim()).filter(t => t)""",
        box["x"] + box["width"] + 10,
    ))


def test_asset_graph_and_materializing_a_partition_from_the_ui(ui, page):
    port, env = ui
    url = f"http://127.0.0.1:{port}"
    nodes = graphql(port, "{ assetNodes { assetKey { path } groupName } }")["data"]["assetNodes"]
    assets = {n["assetKey"]["path"][-1] for n in nodes}
    groups = {n["groupName"] for n in nodes}
    assert {"source_documents", "passages", "instances", "generations", "metric_scores", "long_scores",
            "leaderboard"} <= assets

    # 1. The asset graph lists every asset (groups expanded: Alt+E, the graph menu's "Expand all groups").
    page.goto(f"{url}/asset-groups")
    deadline = time.monotonic() + UI_S
    while not groups <= graph_labels(page):  # the layout is computed in a web worker
        assert time.monotonic() < deadline, f"groups {sorted(groups - graph_labels(page))} never appeared"
        page.wait_for_timeout(250)
    page.keyboard.press("Alt+e")
    deadline = time.monotonic() + UI_S
    while missing := {a for a in assets if not any(shows(lbl, a) for lbl in graph_labels(page))}:
        if time.monotonic() >= deadline:
            page.screenshot(path=str(ARTIFACTS / "asset_graph_missing.png"))
        assert time.monotonic() < deadline, f"assets missing from the graph: {sorted(missing)}"
        page.wait_for_timeout(250)
    page.keyboard.press("Escape")
    page.screenshot(path=str(ARTIFACTS / "asset_graph.png"))

    # 2. Materialize source_documents[demo] from its page, as a user would.
    page.goto(f"{url}/assets/source_documents")
    page.get_by_role("button", name="Materialize").first.click()
    # source_documents is a multi-asset (with source_items, rejected_records): the UI asks to confirm.
    page.get_by_role("button", name="Confirm").click()
    dialog = page.get_by_role("dialog").filter(has_text="Launch runs to materialize")
    dialog.get_by_text("Select a partition or create one").click()
    checkbox = page.get_by_role("checkbox", name="demo")
    page.locator(f"label[for={checkbox.get_attribute('id')}]").click()  # the input itself is drawn over
    page.keyboard.press("Escape")
    page.screenshot(path=str(ARTIFACTS / "launch_dialog.png"))
    dialog.get_by_role("button", name="Launch 1 run").click()

    # 3. Follow the run the toast names ("Launched run 1a2b3c4d") to Success on its page.
    toast = page.get_by_text("Launched run")
    toast.wait_for()
    short_id = toast.inner_text().split()[-1]
    runs = graphql(port, "{ runsOrError { ... on Runs { results { runId status tags { key value } } } } }")
    run = next(r for r in runs["data"]["runsOrError"]["results"] if r["runId"].startswith(short_id))
    assert {"key": "dagster/partition", "value": "demo"} in run["tags"]
    page.goto(f"{url}/runs/{run['runId']}")
    playwright_api.expect(page.get_by_text("Success", exact=True).first).to_be_visible(timeout=RUN_S * 1000)
    page.screenshot(path=str(ARTIFACTS / "run_success.png"))
    run = graphql(port, f'{{ runOrError(runId: "{run["runId"]}") {{ ... on Run {{ status }} }} }}')
    assert run["data"]["runOrError"]["status"] == "SUCCESS"
    lake = Path(env["LCP_LAKE"])
    assert (lake / "source_documents" / "source=demo" / "data.parquet").exists()
    assert (lake / "source_items" / "source=demo" / "data.parquet").exists()

    # 4. The asset page now shows the materialized partition.
    page.goto(f"{url}/assets/source_documents")
    playwright_api.expect(page.get_by_text("Latest materialization")).to_be_visible()
    page.get_by_text("Never materialized").wait_for(state="detached")
    page.screenshot(path=str(ARTIFACTS / "source_documents.png"))


def test_plots_in_asset_metadata_are_drawn_in_the_ui(ui, page):
    port, _ = ui
    page.goto(f"http://127.0.0.1:{port}/assets/leaderboard")
    row = page.locator("tr", has_text="score_vs_length").first
    row.get_by_text("Show Markdown").click()
    plot = page.get_by_role("dialog").get_by_role("img", name="score_vs_length")
    playwright_api.expect(plot).to_be_visible()
    src, width = plot.evaluate("i => [i.src.slice(0, 22), i.naturalWidth]")
    assert src == "data:image/png;base64,"
    assert width > 300, "the browser could not decode the PNG"
    page.get_by_role("dialog").screenshot(path=str(ARTIFACTS / "leaderboard_score_vs_length.png"))

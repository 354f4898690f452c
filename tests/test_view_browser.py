"""The explorer's page in a real browser: headless Chromium driven by selenium, on ``file://``
URLs (no server). The page must draw one element per node of the Python graph, show the Python
side's numbers when a node or a parameter is clicked, collapse and expand groups, move through
the recorded steps, raise no JavaScript error, and draw something.

Without Chromium (Debian's ``chromium`` and ``chromium-driver``) and selenium these tests skip
with the reason; under CI (``CI`` set) they fail instead.
"""

import io

import numpy as np
import pytest
from browser_env import start_browser

import tinyattn as ta
from tinyattn import inspect, walkthrough
from tinyattn.inspect.browser import console_errors, open_page
from tinyattn.inspect.graph import graph_nodes


def softmax(s):
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@pytest.fixture(scope="module")
def driver():
    chromium = start_browser()
    yield chromium
    chromium.quit()


@pytest.fixture(scope="module")
def seed(tmp_path_factory):
    """The seed sentence's page, and the node count of the same graph built independently."""
    path = walkthrough.view().save(tmp_path_factory.mktemp("seed") / "seed.html")
    forward_pass = walkthrough.forward(walkthrough.make_inputs())
    return path, len(graph_nodes(forward_pass.loss, "test"))


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A small causal GPT trained for three steps under a recording of all three, with the
    graph of the third; the node count of that graph, counted before its backward."""
    ta.manual_seed(0)
    model = ta.TransformerLM(ta.models.TransformerLMConfig(13, 8, 16, 2, 2))
    optimizer = ta.optim.AdamW(model.parameters(), lr=1e-2)
    rng = np.random.default_rng(0)
    with inspect.recording(graph_step=3) as rec:
        for _ in range(3):
            idx = ta.tensor(rng.integers(0, 13, (2, 8)))
            _, loss = model(idx, targets=idx)
            count = len(graph_nodes(loss, "test"))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    page = rec.view()
    return page.save(tmp_path_factory.mktemp("trained") / "trained.html"), count, rec, page


def shown(driver, selector):
    return [e for e in driver.find_elements("css selector", selector) if e.is_displayed()]


def field(driver, name):
    element = driver.find_element("css selector", f'#panel [data-field="{name}"]')
    return element.text, element.get_attribute("data-value")


def test_the_graph_has_one_element_per_node(driver, seed, trained):
    open_page(driver, seed[0])
    assert len(driver.find_elements("css selector", "#graph g.node")) == seed[1] == 10
    assert len(driver.find_elements("css selector", "#graph g.leaf")) == 3
    open_page(driver, trained[0])
    assert len(shown(driver, "#graph g.node")) == trained[1] == len(trained[3].nodes)
    assert len(driver.find_elements("css selector", "#graph g.leaf")) == len(trained[3].leaves)
    assert console_errors(driver) == []


def test_a_clicked_node_shows_the_python_sides_numbers(driver, seed):
    inputs = walkthrough.make_inputs()
    X = inputs.X
    Q, K, V = X @ inputs.W_q, X @ inputs.W_k, X @ inputs.W_v
    P = softmax(Q @ K.T * inputs.scale)
    dP = inputs.G @ V.T
    page = walkthrough.view()
    softmax_node = page.nodes[3]
    open_page(driver, seed[0])
    driver.find_element("css selector", '#graph g.node[data-index="3"]').click()
    assert driver.find_element("css selector", "#panel h2").text.startswith("#3 Softmax")
    for name, python, oracle in [
            ("value-norm", softmax_node["outputs"][0]["value"]["norm"], np.linalg.norm(P)),
            ("value-max", softmax_node["outputs"][0]["value"]["max"], P.max()),
            ("grad-norm", softmax_node["outputs"][0]["grad"]["norm"], np.linalg.norm(dP)),
            ("grad-min", softmax_node["outputs"][0]["grad"]["min"], dP.min())]:
        text, exact = field(driver, name)
        assert float(exact) == python, name  # the page shows the Python side's number ...
        assert float(text) == pytest.approx(python, rel=5e-6), name  # ... to 6 digits
        assert python == pytest.approx(oracle, rel=1e-12), name  # which is numpy's
    assert field(driver, "value-zero-fraction")[0] == "0"
    assert field(driver, "check-status")[0] == softmax_node["check"]["status"] == "ok"
    assert float(field(driver, "check-rel")[1]) == softmax_node["check"]["max_rel_error"]
    assert int(field(driver, "memory-bytes")[1]) == P.nbytes
    assert "dS = P ⊙ (dP − rowsum(dP ⊙ P))" in field(driver, "rules")[0]
    assert len(driver.find_elements("css selector", '#panel [data-maps="attention"] canvas')) == 3
    assert driver.execute_script("return window.tinyattnView.lastSelectMs") is not None


def test_a_clicked_parameter_highlights_its_gradient_path(driver, seed):
    open_page(driver, seed[0])
    driver.find_element("css selector", '#graph g.leaf[data-leaf="p0"]').click()
    name = driver.find_element("css selector", "#panel h2").text
    page = walkthrough.view()
    leaf = page.leaf(name)
    assert field(driver, "explain-formula")[0] == leaf["explain"]["formula"]
    highlighted = sorted(int(e.get_attribute("data-index"))
                         for e in driver.find_elements("css selector", "#graph g.node.onpath"))
    assert highlighted == leaf["explain"]["nodes"]
    assert float(field(driver, "grad-norm")[1]) == leaf["grad"]["norm"]
    assert len(driver.find_elements("css selector", "#graph path.edge.path")) >= len(highlighted)


def test_a_group_collapses_and_expands(driver, trained):
    path, _, _, page = trained
    open_page(driver, path)
    group = "TransformerLM/blocks.0"
    inside = []

    def walk(items, within):
        for item in items:
            if "g" in item:
                walk(item["items"], within or item["g"] == group)
            elif "n" in item and within:
                inside.append(item["n"])

    walk(page.data["tree"], False)
    before = len(shown(driver, "#graph g.node"))
    header = driver.find_element("css selector", f'#graph g.group-row[data-group="{group}"]')
    header.click()
    assert "collapsed" in header.get_attribute("class")
    assert len(shown(driver, "#graph g.node")) == before - len(inside) and inside
    assert not driver.find_element("css selector",
                                   f'#graph g.node[data-index="{inside[0]}"]').is_displayed()
    header.click()
    assert len(shown(driver, "#graph g.node")) == before
    assert console_errors(driver) == []


def test_the_step_slider_moves_through_the_recorded_steps(driver, trained):
    from selenium.webdriver.common.keys import Keys

    path, _, rec, _ = trained
    open_page(driver, path)
    driver.find_element("css selector", 'nav button[data-tab="training"]').click()
    label = driver.find_element("css selector", "#step-label")
    assert label.text.startswith("backward call 3")
    slider = driver.find_element("css selector", "#step")
    slider.send_keys(Keys.ARROW_LEFT)
    assert label.text.startswith("backward call 2")
    maps = shown(driver, "canvas.attn-map")
    assert len(maps) == 2 * 2 and {m.get_attribute("data-step") for m in maps} == {"2"}
    cells = driver.find_elements("css selector", '#training-tab [data-field="dS-norm"]')
    recorded = [float(x) for site in rec.records[1].sites for x in site.norms["dS"]]
    assert [float(c.get_attribute("data-value")) for c in cells] == recorded
    driver.find_element("css selector", '#training-tab button[data-kind="P"]').click()
    assert {m.get_attribute("data-kind") for m in shown(driver, "canvas.attn-map")} == {"P"}
    answer = driver.find_element("css selector", '#training-tab [data-field="answer"]').text
    assert "least gradient at query 0" in answer
    assert console_errors(driver) == []
    assert driver.execute_script("return window.tinyattnView.errors") == []


def test_the_page_draws_something(driver, trained):
    from PIL import Image

    open_page(driver, trained[0])
    driver.execute_script("window.tinyattnView.select('n0')")
    picture = Image.open(io.BytesIO(driver.get_screenshot_as_png())).convert("RGB")
    pixels = np.asarray(picture).reshape(-1, 3)
    colours = len(np.unique(pixels, axis=0))
    not_white = float(np.mean(np.any(pixels < 240, axis=1)))
    assert colours > 50 and not_white > 0.05, (colours, not_white)
    assert console_errors(driver) == []


def test_a_nan_is_flagged_where_it_appears(driver, tmp_path):
    w = ta.tensor([[1.0, -2.0], [3.0, 0.5]], requires_grad=True)
    page = inspect.view((w.log() * 2).sum())  # log(−2) is NaN, and so is all that follows
    open_page(driver, page.save(tmp_path / "nan.html"))
    flagged = driver.find_elements("css selector", "#graph g.node .warn")
    assert len(flagged) == sum(n["outputs"][0]["value"]["nan"] > 0 for n in page.nodes) == 3
    driver.find_element("css selector", '#graph g.node[data-index="2"]').click()  # the Log
    assert field(driver, "value-nan")[0] == "1"
    finite = np.log(np.array([1.0, 3.0, 0.5]))
    assert float(field(driver, "value-norm")[0]) == pytest.approx(np.linalg.norm(finite),
                                                                  rel=5e-6)
    assert console_errors(driver) == []


def test_a_recording_without_a_graph_shows_its_steps(driver, tmp_path):
    ta.manual_seed(0)
    model = ta.TransformerLM(ta.models.TransformerLMConfig(11, 6, 8, 2, 1))
    idx = ta.tensor([[1, 2, 3, 4]])
    with inspect.recording() as rec:
        for _ in range(3):
            _, loss = model(idx, targets=idx)
            loss.backward()
    open_page(driver, rec.view().save(tmp_path / "steps.html"))
    assert driver.find_element("css selector", "#step-label").text.startswith("backward call 3")
    assert len(shown(driver, "canvas.attn-map")) == 2
    assert "No graph was captured" in driver.find_element("css selector", "#graph-pane") \
        .get_attribute("textContent")  # on the Graph tab, hidden: the Training tab is shown
    assert console_errors(driver) == []

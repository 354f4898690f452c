"""The README's picture of the explorer: the backward pass of one attention head on "Your
journey starts with one step", its softmax node selected, photographed in headless Chromium.

The page is ``tinyattn view`` (``tinyattn.walkthrough.view()``): one self-contained HTML file.
This script opens it from a ``file://`` URL, clicks node #3 (the softmax, whose panel shows
its rule ``dS = P ⊙ (dP − rowsum(dP ⊙ P))``, the statistics of P and dP and their heatmaps),
and saves a screenshot after checking that the page raised no JavaScript error and that the
picture is not blank. It needs selenium and Chromium with its chromedriver (Debian:
``apt-get install chromium chromium-driver``).

Run: ``python examples/lab/view_screenshot.py [--out docs/view.png] [--causal]``
"""

import argparse
import io
import tempfile
from pathlib import Path

import numpy as np
from PIL import Image

from tinyattn import walkthrough
from tinyattn.inspect import browser


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("docs") / "view.png",
                        help="where to write the PNG (default docs/view.png)")
    parser.add_argument("--causal", action="store_true", help="mask the scores causally")
    args = parser.parse_args()
    page = walkthrough.view(causal=args.causal)
    with tempfile.TemporaryDirectory() as folder:
        path = page.save(Path(folder) / "seed.html")
        driver = browser.headless_chromium(1280, 1000)
        try:
            browser.open_page(driver, path)
            driver.find_element("css selector", '#graph g.node[data-index="3"]').click()
            errors = browser.console_errors(driver) + driver.execute_script(
                "return window.tinyattnView.errors")
            png = driver.get_screenshot_as_png()
        finally:
            driver.quit()
    if errors:
        raise SystemExit(f"the page raised JavaScript errors: {errors}")
    pixels = np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).reshape(-1, 3)
    colours = len(np.unique(pixels, axis=0))
    if colours < 50:
        raise SystemExit(f"the screenshot looks blank ({colours} colours)")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(png)
    out = page.nodes[3]["outputs"][0]
    print(f"selected #3 {page.nodes[3]['op']}: |P| = {out['value']['norm']:.6f}, "
          f"|dP| = {out['grad']['norm']:.6f}")
    print(f"wrote {args.out} ({len(png):,} bytes, {colours} colours)")


if __name__ == "__main__":
    main()

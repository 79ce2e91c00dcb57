"""The built docs site, read the way a person reads it: served, and opened in Chromium.

:func:`serve` serves a built site on the loopback interface; :func:`chromium` starts
headless Chromium (Debian's ``chromium``, driven by its ``chromedriver`` through selenium:
the driver is the one built for that browser, and nothing is downloaded); :func:`read_page`
opens one page and reports what a reader would notice — an error on the console, an image
that did not load, a diagram that did not draw, a code line cut off, an identifier broken
across lines — and every link on it.

mkdocs-material draws a mermaid diagram into a *closed* shadow root, which no script of the
page can see into; Chrome's DevTools protocol can (``DOM.getDocument`` with ``pierce``), so
that is how each diagram's ``<svg>`` is found and measured.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import re
import shutil
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ("FLAGS", "PageReport", "chromium", "read_page", "serve")

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1280,900",
)
"""Chromium's flags: headless, and nothing of its own reaching out to the network."""


@dataclass(frozen=True, slots=True)
class PageReport:
    """What one page showed a reader."""

    path: str
    errors: tuple[str, ...]
    """Console errors: a failed resource, an uncaught exception, a rejected promise."""
    broken_images: tuple[str, ...]
    diagrams: tuple[int, ...]
    """One entry per mermaid fence of the page: the elements its drawn ``<svg>`` holds."""
    headings: int
    """``<h1>`` elements of the article."""
    clipped_code: tuple[str, ...]
    """Code blocks whose lines are wider than the block (cut off, behind a scroll bar)."""
    broken_identifiers: tuple[str, ...]
    """Inline code in a table cell drawn on more than one line."""
    links: tuple[str, ...]


@contextlib.contextmanager
def serve(site: Path) -> Iterator[str]:
    """Serve ``site`` on 127.0.0.1; yields its base URL."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

    handler = functools.partial(Quiet, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def browser_paths() -> tuple[str, str]:
    """Chromium and its chromedriver (``./scripts/setup`` installs Debian's packages)."""
    found = shutil.which("chromium"), shutil.which("chromedriver")
    if None in found:
        raise RuntimeError(
            "chromium and chromedriver are needed (Debian: apt-get install chromium "
            "chromium-driver; ./scripts/setup does it)"
        )
    return found  # type: ignore[return-value]


@contextlib.contextmanager
def chromium() -> Iterator[Any]:
    """A headless Chromium with a profile of its own, its console log kept."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    binary, driver_path = browser_paths()
    with tempfile.TemporaryDirectory(prefix="toolray-chromium-") as profile:
        options = webdriver.ChromeOptions()
        options.binary_location = binary
        for flag in (*FLAGS, f"--user-data-dir={profile}"):
            options.add_argument(flag)
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        driver = webdriver.Chrome(options=options, service=Service(driver_path))
        try:
            yield driver
        finally:
            driver.quit()


_PAGE_FACTS = """
const code = [...document.querySelectorAll("article pre > code")];
const cells = [...document.querySelectorAll("article td code, article th code")];
return {
  images: [...document.images].filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.src),
  headings: document.querySelectorAll("article h1").length,
  clipped: code.filter(c => c.scrollWidth > c.clientWidth + 1).map(c => c.textContent.slice(0, 60)),
  broken: cells.filter(c => c.getClientRects().length > 1).map(c => c.textContent),
  links: [...document.querySelectorAll("a[href]")].map(a => a.href),
};
"""


def read_page(
    driver: Any, base: str, path: str, html: str, *, diagram_timeout_s: float = 30.0
) -> PageReport:
    """Open ``path`` (``""`` for the home page) and report what it showed.

    ``html`` is the page's file: its mermaid fences are the diagrams the page must draw,
    each within ``diagram_timeout_s`` (they are drawn after the page has loaded).
    """
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(base + path)  # returns once the page has loaded (images included)
    fences = html.count('<pre class="mermaid">')
    if fences:
        drawn = f"return document.querySelectorAll('div.mermaid').length >= {fences}"
        with contextlib.suppress(TimeoutException):  # the report then shows what is missing
            WebDriverWait(driver, diagram_timeout_s).until(lambda d: d.execute_script(drawn))
    facts = driver.execute_script(_PAGE_FACTS)
    errors = tuple(e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE")
    return PageReport(
        path=path,
        errors=errors,
        broken_images=tuple(facts["images"]),
        diagrams=_diagrams(driver, fences),
        headings=facts["headings"],
        clipped_code=tuple(facts["clipped"]),
        broken_identifiers=tuple(facts["broken"]),
        links=tuple(facts["links"]),
    )


def _diagrams(driver: Any, fences: int) -> tuple[int, ...]:
    """Per diagram, the elements of its ``<svg>`` (0: not drawn, or mermaid's error picture)."""
    if not fences:
        return ()
    document = driver.execute_cdp_cmd("DOM.getDocument", {"depth": -1, "pierce": True})
    drawn = [_svg_size(div) for div in _find(document["root"], _is_diagram)]
    return tuple(drawn + [0] * (fences - len(drawn)))


def _is_diagram(node: dict[str, Any]) -> bool:
    attributes = node.get("attributes", [])
    classes = dict(zip(attributes[::2], attributes[1::2], strict=True)).get("class", "")
    return node.get("localName") == "div" and "mermaid" in classes.split()


def _find(node: dict[str, Any], wanted: Any) -> list[dict[str, Any]]:
    found = [node] if wanted(node) else []
    for child in [*node.get("children", []), *node.get("shadowRoots", [])]:
        found += _find(child, wanted)
    return found


def _svg_size(div: dict[str, Any]) -> int:
    svgs = [n for root in div.get("shadowRoots", []) for n in _find(root, _is_svg)]
    if not svgs:
        return 0
    attributes = svgs[0].get("attributes", [])
    if dict(zip(attributes[::2], attributes[1::2], strict=True)).get("aria-roledescription") == (
        "error"
    ):
        return 0
    return len(_find(svgs[0], lambda n: n.get("nodeType") == 1)) - 1


def _is_svg(node: dict[str, Any]) -> bool:
    return node.get("localName") == "svg"


def ids_of(html: str) -> set[str]:
    """Every ``id`` of a page (what a ``#fragment`` may point at)."""
    return set(re.findall(r'\bid="([^"]+)"', html))

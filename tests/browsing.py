"""The browser the tests drive: Debian's Chromium, headless, through Playwright (never a browser
download), and a built site served to it over HTTP on 127.0.0.1.

Importing this module skips the test module (or the test) that imports it where Playwright or
Chromium is missing, as the browser tests' own module did before: tests/browser/, and the
browser-marked tests of other stages (render/test_display.py, render/test_launch.py).
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

import timing

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (the test extra)")
if not CHROMIUM.exists():
    pytest.skip(f"no Chromium at {CHROMIUM} (.ci/run installs Debian's chromium)", allow_module_level=True)
expect = sync_api.expect


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # the base's name
        """Keep the request log out of the test output."""


@contextlib.contextmanager
def serving(directory: Path) -> Iterator[str]:
    """``directory`` over HTTP on a free port of 127.0.0.1; its base URL."""
    handler = functools.partial(_QuietHandler, directory=str(directory))
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, name="test-browser-http", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=timing.EXIT)


@contextlib.contextmanager
def chromium() -> Iterator[Any]:
    """Debian's Chromium, headless, through Playwright; closed at the end."""
    playwright = sync_api.sync_playwright().start()
    try:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()
    finally:
        playwright.stop()

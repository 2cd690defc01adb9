"""Build the feature book (book/) with real kernels in four themes, LaTeX and linkcheck, and
check what each wrote; screenshots in Chromium, light and dark.

    PYTHONPATH=$PWD/ext .venv/bin/python bench/feature_book/build.py [WORKDIR] [--shots DIR]

The book is copied to WORKDIR (default: a temporary folder), so its store starts empty. Each
check that fails is printed; the exit status is the number of failed checks (0: all passed).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bs4 import BeautifulSoup

HERE = Path(__file__).resolve().parent
PYTHON = sys.executable
THEMES = ["alabaster", "furo", "pydata_sphinx_theme", "sphinx_book_theme"]
DARK = {"furo", "pydata_sphinx_theme", "sphinx_book_theme"}
SUMMARY = re.compile(r"livecells: (\d+) session\(s\) run, (\d+) from the store")
failed: list[str] = []


def check(ok: bool, what: str) -> None:
    print(("ok    " if ok else "FAIL  ") + what)
    if not ok:
        failed.append(what)


def build(src: Path, out: Path, builder: str = "html", *args: str) -> tuple[str, float]:
    started = time.monotonic()
    done = subprocess.run(
        [PYTHON, "-m", "sphinx", "-b", builder, "-d", str(out / ".doctrees"), *args, str(src), str(out)],
        capture_output=True, text=True, env={**os.environ, "NO_COLOR": "1"},
    )
    log = done.stdout + done.stderr
    (out.parent / f"{out.name}.log").write_text(log)
    check(done.returncode == 0, f"{builder} {' '.join(args)} -> {out.name}: exit status 0")
    return log, time.monotonic() - started


def ran(log: str) -> tuple[int, int]:
    found = SUMMARY.search(log)
    return (int(found[1]), int(found[2])) if found else (-1, -1)


def kernels_of(work: Path) -> list[str]:
    """Kernel processes still running in the book's folders (other builds' are not ours)."""
    left = []
    for proc in Path("/proc").iterdir():
        try:
            if "ipykernel" in (proc / "cmdline").read_text() and str(work) in os.readlink(proc / "cwd"):
                left.append(proc.name)
        except OSError:
            continue
    return left


def check_html(out: Path, theme: str) -> None:
    features = BeautifulSoup((out / "features.html").read_text(), "html.parser")
    body = features.select_one("div.livecells-cell").find_parent("section") or features
    # Nothing author- or cell-given became markup: no script, handler or <b> from the book.
    check(not body.select("script") and not body.select("[onerror]") and not body.select("summary b"),
          f"{theme}: hostile captions, summaries, alt and values stay text")
    check(all(img.get("alt") for img in body.select("img")), f"{theme}: images have alt text")
    summaries = [s.get_text() for s in body.select("details > summary")]
    check(any("</summary><b>plot</b>" in s for s in summaries), f"{theme}: the author's summary shown as text")
    check(len(body.select("details.livecells-collapsed-output")) == 2, f"{theme}: collapsed outputs in both tabs")
    captions = [c.get_text(" ", strip=True) for c in body.select("figcaption")]
    check(any(c.startswith("Fig. 1") for c in captions) and any(c.startswith("Fig. 2") for c in captions),
          f"{theme}: both tabs' figures numbered ({captions[:2]})")
    figure = body.select_one("figure#fig-sine")
    check(figure is not None and figure.find_parent("details") is not None,
          f"{theme}: the figure sits in the collapsed output")
    values = [v.get_text() for v in body.select(".livecells-value")]
    hostile = [v for v in values if v.startswith("<script>alert('v')</script> & \\textbf{v} $x$")]
    check(len(hostile) == 3 and "??" in values,
          f"{theme}: values quoted as text, in tabs and outside; a missing one is ??")
    check(bool(body.select(".sd-tab-content .livecells-value")), f"{theme}: values quoted inside live-text tabs")
    check(bool(body.select('span[style*="rgb(255, 135, 0)"]')), f"{theme}: 256-colour ANSI kept")
    titles = " ".join(v.get("title", "") for v in body.select(".livecells-value"))
    check(f" on {os.uname().nodename}" not in titles + body.get_text(), f"{theme}: no host name (show_host off)")
    errors = BeautifulSoup((out / "errors.html").read_text(), "html.parser")
    check(bool(errors.select('.livecells-error span[style*="rgb(255, 0, 255)"]')),
          f"{theme}: 256-colour ANSI inside an error traceback")
    check(not errors.select(".livecells-error b"), f"{theme}: <b> in a traceback stays text")
    odd = (out / "chap ter" / "ünïcode page.html").read_text()
    check("chap%20ter/%C3%BCn%C3%AFcode%20page.pytorch.ipynb" in odd, f"{theme}: launch links percent-encoded")
    check((out / "_downloads/livecells/chap ter/ünïcode page.pytorch.ipynb").exists(),
          f"{theme}: notebook of the odd docname written")
    import nbformat

    notebook = nbformat.read(out / "_downloads/livecells/features.numpy.ipynb", as_version=4)
    nbformat.validate(notebook)
    marks = [c.metadata.get("jupyter", {}) for c in notebook.cells if c.cell_type == "code"]
    check(marks[0] == {"source_hidden": True} and marks[3] == {"source_hidden": True, "outputs_hidden": True},
          f"{theme}: the notebook marks collapsed code and output")
    excluded = (out / "excluded" / "figure.html").read_text()
    check("excluded from execution" in excluded and "An excluded figure, recorded" in excluded
          and "output_figure_abc_0_0.svg" in excluded, f"{theme}: excluded page shows its recorded figure")
    check(not (out / "_livecells").exists(), f"{theme}: no build internals in the site")


def check_latex(tex: str) -> None:
    check("\\end{document}" in tex and tex.count("\\end{document}") == 1, "latex: one \\end{document}")
    check("onerror=alert(1)\\textgreater{}" in tex, "latex: the caption's markup escaped")
    check("\\textcolor[RGB]{255,0,255}{magenta 256}" in tex, "latex: 256-colour ANSI in a traceback")
    check("\\PYGZbs{}end\\PYGZob{}verbatim\\PYGZcb{}" in tex, "latex: \\end{verbatim} in output escaped")
    check("\\textbackslash{}textbf\\{v\\}" in tex, "latex: a quoted value escaped")
    check("Show code" not in tex, "latex: collapsed parts printed in full, no summary")


def screenshots(sites: dict[str, Path], shots: Path) -> None:
    from playwright.sync_api import sync_playwright

    shots.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox", "--disable-gpu"])
        try:
            for theme, out in sites.items():
                for scheme in ["light", "dark"] if theme in DARK else ["light"]:
                    page = browser.new_page(viewport={"width": 1200, "height": 900}, color_scheme=scheme)
                    page.goto((out / "features.html").as_uri())
                    page.locator("details.livecells-collapsed-output").first.locator("summary").click()
                    opened = page.locator("details.livecells-collapsed-output").first.get_attribute("open")
                    check(opened is not None, f"{theme} {scheme}: a collapsed output opens on click")
                    page.locator("figure#fig-sine").scroll_into_view_if_needed()
                    page.screenshot(path=str(shots / f"{theme}-{scheme}-features.png"))
                    page.goto((out / "errors.html").as_uri())
                    page.screenshot(path=str(shots / f"{theme}-{scheme}-errors.png"), full_page=True)
                    page.close()
        finally:
            browser.close()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("work", nargs="?", type=Path)
    parser.add_argument("--shots", type=Path)
    options = parser.parse_args()
    work = (options.work or Path(tempfile.mkdtemp(prefix="feature-book-"))).resolve()
    src = work / "book"
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(HERE / "book", src, ignore=shutil.ignore_patterns("_livecells", "_build"))
    sites: dict[str, Path] = {}
    for n, theme in enumerate(THEMES):
        out = work / f"html-{theme}"
        log, took = build(src, out, "html", "-D", f"html_theme={theme}")
        print(f"      ({took:.1f} s)")
        sessions, stored = ran(log)
        if n == 0:
            check(sessions == 7 and stored == 0, f"{theme}: the first build runs the 7 sessions ({sessions})")
            check("KeyboardInterrupt" in log and "Boom" in log, "show_tb: timeout and error tracebacks in the log")
            check("ERROR: live-cell [pytorch]: wrote to stderr" in log, "stderr=error is an ERROR")
        else:
            check(sessions == 0 and stored == 7, f"{theme}: a second build comes from the store ({stored})")
            check("wrote to stderr: this is an error-level <stderr> line (stored result" in log,
                  f"{theme}: stderr=error again from the store")
        check(not kernels_of(work), f"{theme}: no kernel left")
        check_html(out, theme)
        sites[theme] = out
    log, _ = build(src, work / "html-j2", "html", "-j", "2", "-D", "livecells_execute=force")
    check(ran(log) == (7, 0), f"-j 2 force: 7 sessions run ({ran(log)})")
    check_html(work / "html-j2", "-j 2")
    log, _ = build(src, work / "latex", "latex", "-D", "livecells_latex_framework=all")
    check_latex((work / "latex" / "featurebook.tex").read_text())
    log, _ = build(src, work / "linkcheck", "linkcheck")
    check("no cell runs" in log and "executing cells" not in log and not kernels_of(work), "linkcheck runs nothing")
    report = subprocess.run([PYTHON, "-m", "livecells", "report", "-s", str(src)], capture_output=True, text=True)
    print(report.stdout)
    check(report.returncode == 1 and "2 cell error(s)" in report.stdout + report.stderr,
          "report: exit 1, the timeout's and Boom's errors")
    if options.shots:
        screenshots(sites, options.shots)
    print(f"{len(failed)} check(s) failed" + (":\n  " + "\n  ".join(failed) if failed else ""))
    return len(failed)


if __name__ == "__main__":
    sys.exit(main())

"""End to end with real kernels, real torch and real mxnet: one build of tests/roots/test-core."""

from __future__ import annotations

import json
import re

import pytest

import timing
from conftest import kernel_processes
from helpers import build_site, cell_with, cells, meta, outputs, soup

# frameworks: the site's cells are torch and mxnet cells (the default frameworks).
pytestmark = [pytest.mark.slow, pytest.mark.kernel, pytest.mark.frameworks]


@pytest.fixture(scope="module")
def built(tmp_path_factory, rootdir):
    """Build the core root once; the tests below read its pages, warnings and store."""
    import shutil

    src = tmp_path_factory.mktemp("core") / "src"
    shutil.copytree(rootdir / "test-core", src)
    app, warnings = build_site(src)
    return {
        "app": app,
        "src": src,
        "index": soup(app.outdir / "index.html"),
        "sub": soup(app.outdir / "sub" / "page.html"),
        "html": (app.outdir / "index.html").read_text(encoding="utf-8"),
        "warnings": warnings,
        "kernels_left": kernel_processes(),
    }


def test_live_output_replaces_recorded(built):
    html = built["html"]
    assert "STATIC-TORCH-0.1111" not in html
    assert "STATIC-MXNET-0.2222" not in html
    torch_cell = cell_with(built["index"], "torch.ones")
    mx_cell = cell_with(built["index"], "np.ones")
    assert "tensor([[3., 3.]])" in outputs(torch_cell)
    assert "array([[3., 3.]])" in outputs(mx_cell)


def test_tabs_are_sphinx_design_tab_sets_synced_by_framework(built):
    tab_set = built["index"].select_one("div.sd-tab-set")
    labels = tab_set.select("label.sd-tab-label")
    assert [label.get_text(strip=True) for label in labels] == ["PyTorch", "MXNet"]
    assert [label["data-sync-id"] for label in labels] == ["pytorch", "mxnet"]
    assert {label["data-sync-group"] for label in labels} == {"framework"}


def test_preload_is_imported_but_not_bound(built):
    cell = cell_with(built["index"], "torch bound")
    assert "torch bound: False | preloaded: True" in outputs(cell)


def test_state_is_shared_in_document_order(built):
    assert "tensor([[30., 30.]])" in outputs(cell_with(built["index"], "z * 10"))


def test_all_cell_shown_once_without_tabs_and_run_everywhere(built):
    page = built["index"]
    matching = [c for c in cells(page) if "from every framework" in c.get_text()]
    assert len(matching) == 1
    cell = matching[0]
    assert cell.find_parent("div", class_="sd-tab-set") is None
    assert "from every framework" in outputs(cell)
    lines = meta(cell)
    assert any(line.startswith("PyTorch") for line in lines)
    assert any(line.startswith("MXNet") for line in lines)


def test_fd_level_output_is_captured(built):
    text = outputs(cell_with(built["index"], "fd-two"))
    assert "fd-two says hi" in text
    assert "c-level stdout" in text


def test_hide_code_and_hide_output(built):
    page = built["index"]
    hidden_code = [c for c in cells(page) if "SHOWN-OUTPUT-OF-HIDDEN-CODE" in c.get_text()]
    assert len(hidden_code) == 1 and hidden_code[0].select_one(".livecells-input") is None
    hidden_output = cell_with(page, "HIDDEN_CODE_SHOWN")
    assert hidden_output.select(".livecells-output") == []
    assert "HIDDEN-OUTPUT" not in " ".join(outputs(c) for c in cells(page))


def test_expected_error_is_shown_without_warning(built):
    cell = cell_with(built["index"], "1 / 0")
    assert "ZeroDivisionError" in outputs(cell)
    assert "ZeroDivisionError" not in built["warnings"]


def test_unexpected_error_warns_at_the_failing_line(built):
    warnings = built["warnings"]
    source = built["src"] / "index.rst"
    lines = source.read_text().splitlines()
    expected_line = lines.index("   undefined_name_here") + 1
    assert re.search(
        rf"index\.rst:{expected_line}: WARNING: live-cell \[pytorch\]: NameError: .*undefined_name_here.*"
        r"\[livecells\.error\]",
        warnings,
    ), warnings
    assert "NameError" in outputs(cell_with(built["index"], "undefined_name_here"))


def test_output_is_escaped_and_ansi_free(built):
    html = built["html"]
    assert "<script>alert" not in html
    text = outputs(cell_with(built["index"], "alert("))
    assert "<script>alert('x')</script> & red" in text  # escaped in the HTML, text again here
    assert "\x1b" not in html
    assert "[31m" not in text


def test_figure_becomes_an_image(built):
    cell = cell_with(built["index"], "plt.subplots")
    image = cell.select_one("img")
    assert image is not None
    assert (built["app"].outdir / image["src"]).is_file()


@pytest.mark.wallclock
def test_timing_line_measures_the_cell(built):
    lines = meta(cell_with(built["index"], "time.sleep(0.3)"))
    seconds = float(re.search(r"([\d.]+) s", lines[0]).group(1))
    assert abs(seconds - 0.3) < timing.TIMED_SLEEP, lines


def test_timing_line_names_device_and_version_once_per_tab(built):
    first = meta(cell_with(built["index"], "torch.ones"))[0]
    assert re.fullmatch(r"[\d.]+ s · .+ · torch \d+\.\d+.*", first), first
    later = meta(cell_with(built["index"], "time.sleep(0.3)"))[0]
    assert re.fullmatch(r"[\d.]+ s", later), later


def test_no_timing_option(built):
    cell = cell_with(built["index"], "NO-TIMING-CELL")
    assert not any(re.search(r"\d s\b", line) for line in meta(cell))


def test_name_is_a_reference_target(built):
    page = built["index"]
    assert page.find(id="escaping-cell") is not None
    assert page.select_one('a[href="#escaping-cell"]') is not None


def test_working_directory_is_the_page_folder_and_pages_do_not_share_state(built):
    text = outputs(cell_with(built["sub"], "import helper"))
    assert "DATA-BESIDE-THE-PAGE HELPER-MODULE" in text
    assert "x defined here: False" in text


def test_results_are_stored_as_plain_json(built):
    data = json.loads((built["src"] / "_livecells" / "index.json").read_text())
    assert set(data["sessions"]) == {"pytorch", "mxnet"}
    torch_session = data["sessions"]["pytorch"]
    assert torch_session["provenance"]["framework_version"].startswith("2.")
    assert all("outputs" in cell for cell in torch_session["cells"])


def test_no_kernel_outlives_the_build(built):
    assert built["kernels_left"] == []

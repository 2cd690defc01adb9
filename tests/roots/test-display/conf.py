# The display options of live-cell (line numbers, emphasis, code below, collapsed parts, image
# size and alt text, output figures) in RST and MyST pages, tabs and `all` cells; two light
# frameworks, run by tests/helpers.FakeKernels.
extensions = ["myst_parser", "livecells"]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
numfig = True
livecells_frameworks = {
    "alpha": {"label": "Alpha", "kernel": "python3", "preload": []},
    "beta": {"label": "Beta", "kernel": "python3", "preload": []},
}
livecells_timeout = 30

# Values, times and ratios quoted in prose (RST and MyST); two light frameworks.
extensions = ["myst_parser", "livecells"]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
livecells_frameworks = {
    "alpha": {"label": "Alpha", "kernel": "python3"},
    "beta": {"label": "Beta", "kernel": "python3"},
}
livecells_timeout = 30
livecells_allow_html = False
html_sidebars = {"**": ["localtoc.html"]}  # a table of contents with a title that quotes a value

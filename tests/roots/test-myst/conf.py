# MyST Markdown pages beside an RST page; two light frameworks on plain Python kernels.
extensions = ["myst_parser", "livecells"]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
livecells_frameworks = {
    "alpha": {"label": "Alpha", "kernel": "python3"},
    "beta": {"label": "Beta", "kernel": "python3"},
}
livecells_timeout = 30

# A light framework pair for fast tests: plain Python kernels, nothing preloaded.
extensions = ["livecells"]
livecells_frameworks = {
    "alpha": {"label": "Alpha", "kernel": "python3"},
    "beta": {"label": "Beta", "kernel": "python3"},
}
livecells_timeout = 30

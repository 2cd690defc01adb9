# Two pages of cells under alabaster (Sphinx's default theme), for the theme, `-j` and builder
# tests. Plain Python kernels with nothing preloaded, so that the build is fast.
extensions = ["livecells"]
html_theme = "alabaster"
livecells_frameworks = {
    "pytorch": {"label": "PyTorch", "kernel": "python3", "preload": []},
    "mxnet": {"label": "MXNet", "kernel": "python3", "preload": []},
}
livecells_timeout = 30

# Two pages of pytorch/mxnet tab sets for the browser and theme tests, and a page of framework
# prose (live-text) in a cell group's tabs and standing alone. The frameworks are named
# like the real ones (the tabs are the same) but run on plain Python kernels with nothing
# preloaded, so that the build is fast.
extensions = ["livecells"]
html_theme = "furo"  # the theme of the livecells docs
livecells_frameworks = {
    "pytorch": {"label": "PyTorch", "kernel": "python3", "preload": []},
    "mxnet": {"label": "MXNet", "kernel": "python3", "preload": []},
}
livecells_timeout = 30

# One page of each kind of output (normal, error, stderr, recorded, stored), for the theme look
# tests (tests/browser/test_looks.py): the theme comes from the test. Plain Python kernels, nothing
# preloaded. "offline" never runs (no such kernel), so its cell shows its recorded output.
extensions = ["livecells"]
html_theme = "alabaster"
livecells_frameworks = {
    "pytorch": {"label": "PyTorch", "kernel": "python3", "preload": []},
    "mxnet": {"label": "MXNet", "kernel": "python3", "preload": []},
    "offline": {"label": "Offline", "kernel": "no-such-kernel", "preload": []},
}
livecells_timeout = 30

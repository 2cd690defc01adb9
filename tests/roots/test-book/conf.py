# A small book on light frameworks named like the real ones: pytorch and mxnet are plain python3
# kernels with nothing preloaded, so the builds of every builder stay fast.
extensions = ["livecells"]
project = "Book"
livecells_frameworks = {
    "pytorch": {"label": "PyTorch", "kernel": "python3", "preload": []},
    "mxnet": {"label": "MXNet", "kernel": "python3", "preload": []},
}
livecells_timeout = 30
latex_documents = [("index", "book.tex", "Book", "livecells", "manual")]

# Framework prose and recorded outputs on light frameworks: pytorch and mxnet are plain python3
# kernels with nothing preloaded, so a build takes a few seconds. A framework named like one
# livecells knows keeps its defaults for what is unset, its preload too: "preload" is set empty.
extensions = ["livecells"]
project = "Prose"
numfig = True
math_numfig = True
livecells_frameworks = {
    "pytorch": {"label": "PyTorch", "kernel": "python3", "preload": []},
    "mxnet": {"label": "MXNet", "kernel": "python3", "preload": []},
}
livecells_timeout = 30
latex_documents = [("index", "prose.tex", "Prose", "livecells", "manual")]

# The oracle corpus (tests/data/oracle/cells.py) is written into index pages by tests/kernel/test_oracle.py.
extensions = ["livecells"]
livecells_frameworks = {
    "pytorch": {"label": "PyTorch", "kernel": "python3", "preload": ["torch"]},
    "mxnet": {"label": "MXNet", "kernel": "python3", "preload": ["mxnet"]},
}
livecells_timeout = 120

# Sessions run on a Dask cluster; tests/execute/test_dask.py sets livecells_executor to its scheduler.
extensions = ["livecells"]
livecells_frameworks = {
    "alpha": {"label": "Alpha", "kernel": "python3"},
    "beta": {"label": "Beta", "kernel": "python3"},
}
livecells_timeout = 30

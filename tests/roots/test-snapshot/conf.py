# Render from a committed store (_livecells/, made once by FakeKernels): doctree snapshot tests.
extensions = ["livecells"]
livecells_frameworks = {
    "alpha": {"label": "Alpha", "kernel": "python3"},
    "beta": {"label": "Beta", "kernel": "python3"},
}
livecells_execute = "cache"

extensions = ["livecells"]
livecells_frameworks = {"alpha": {"label": "Alpha", "kernel": "python3"}}

# Process-containment tests: one plain Python framework; tests add pages and settings.
extensions = ["livecells"]
livecells_frameworks = {"alpha": {"label": "Alpha", "kernel": "python3"}}
livecells_timeout = 60

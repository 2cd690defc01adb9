# Hardening tests: two light frameworks (plain python3 kernels); most tests write store files
# by hand and build with livecells_execute = "cache", so that no kernel starts.
extensions = ["livecells"]
livecells_frameworks = {
    "alpha": {"label": "Alpha", "kernel": "python3"},
    "beta": {"label": "Beta", "kernel": "python3"},
}
livecells_timeout = 30

# Bad cells, dying kernels and bad configuration: the build must go on and say where.
extensions = ["livecells"]
livecells_frameworks = {
    "alpha": {"label": "Alpha", "kernel": "python3"},
    "beta": {"label": "Beta", "kernel": "python3"},
    "gamma": {"label": "Gamma", "kernel": "no-such-kernelspec"},
    "delta": {"label": "Delta", "kernel": "python3", "preload": ["not_an_installed_module"]},
}
livecells_timeout = 20
livecells_output_limit = 20000
livecells_allow_html = False  # hostile output: text/html must stay text here
# Two sessions at once: the timeouts and the kernel that ignores its interrupt (2 s + its grace) overlap the
# other pages, and sessions running side by side on real kernels are tested too.
livecells_jobs = 2

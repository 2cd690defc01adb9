# The feature book: every feature of issue #26 in one small book, run in real kernels
# (bench/feature_book/README.md). The theme comes from -D html_theme=... (build.py).
project = "Feature book"
extensions = ["myst_parser", "livecells"]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build"]
numfig = True
html_theme = "alabaster"
livecells_frameworks = {
    "numpy": {"label": "NumPy", "kernel": "python3", "preload": ["numpy"],
              "version_of": "numpy", "gpu_used": "False"},
    "pytorch": {},
}
livecells_timeout = 60
livecells_execute_exclude = ["excluded/*"]
livecells_stderr = "warn"
livecells_show_tb = True
livecells_image_options = {"width": "70%", "alt": 'default "alt" <b>'}
livecells_launch = {
    "colab": "https://colab.research.google.com/github/org/repo/blob/gh-pages/{path}",
    "binder": "https://mybinder.org/v2/gh/org/repo/gh-pages?labpath={path}",
    "Our Hub & <Co>": {"pytorch": "https://hub.example.org/open?d={docname}&f={framework}"},
}
linkcheck_ignore = [r".*"]

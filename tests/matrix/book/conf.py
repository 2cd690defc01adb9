# The matrix's book (tests/matrix/run): two pages, two frameworks that install on every Python
# livecells supports (NumPy, plain Python), run in real kernels of the venv under test.
project = "livecells matrix"
extensions = ["livecells"]
livecells_frameworks = {
    "numpy": {"label": "NumPy", "kernel": "python3", "preload": ["numpy"]},
    "python": {"label": "Python", "kernel": "python3"},
}
livecells_timeout = 60

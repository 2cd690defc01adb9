"""Programs that run in a kernel's own Python (or a fork-server template's, or the guard's), not
in the build: the timing hook and its output budget, the fork-server template and what it shares,
how long a template lives, what an interpreter says of itself, process reaping.

That Python need not have livecells, Sphinx or any site-packages: each module imports only the
standard library, and on that side each is loaded by its file's path, never by its name. The
build imports them as modules too, for their constants and their unit tests.
"""

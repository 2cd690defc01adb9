"""What a user installing livecells meets first: its version, a clear error on a platform it does
not support, the jupyter_client versions it declares. The wheel itself, on every supported Python
at both ends of the dependency ranges, is `make test-matrix` (tests/matrix/run.py)."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from importlib.metadata import version

from livecells.execute.kernels.session import _msg_id

import timing
from helpers import livecells_cli
from paths import REPO


def test_version_is_the_package_metadata():
    declared = re.search(r'^version = "(.+)"$', (REPO / "pyproject.toml").read_text(), re.M).group(1)
    done = livecells_cli("--version")
    assert done.returncode == 0
    assert done.stdout.strip() == f"livecells {version('livecells')}" == f"livecells {declared}"


def test_setup_without_fcntl_is_a_clear_extension_error():
    # A fresh Python where fcntl cannot be imported, as on Windows: setup() says why, before
    # importing the modules that need it.
    code = (
        "import sys; sys.modules['fcntl'] = None\n"
        "import livecells\n"
        "from sphinx.errors import ExtensionError\n"
        "try:\n"
        "    livecells.setup(None)\n"
        "except ExtensionError as error:\n"
        "    print('ExtensionError:', error)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timing.PYTHON_CHECK)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ExtensionError: livecells runs on POSIX systems"), done.stdout
    assert "fcntl" in done.stdout


def test_request_ids_from_jupyter_client_8_0_and_later():
    # jupyter_client 8.0's async client returned each request's msg_id inside a finished Future
    # (8.1 on: the msg_id itself); replies are matched on the id, never on the Future.
    async def sent_by_8_0() -> asyncio.Future:
        future = asyncio.get_running_loop().create_future()
        future.set_result("abc-1")
        return future

    assert _msg_id(asyncio.run(sent_by_8_0())) == "abc-1"
    assert _msg_id("abc-2") == "abc-2"


def test_readme_links_resolve():
    readme = (REPO / "README.md").read_text()
    targets = re.findall(r"\]\(([^)#\s]+)\)", readme)
    local = [t for t in targets if "://" not in t]
    assert local, "the README links its docs"
    assert [t for t in local if not (REPO / t).exists()] == []
    assert "SPEC.md" not in readme  # the contract is not part of this repository


def test_the_support_table_states_the_declared_ranges():
    """docs/installation.rst's table of supported versions says what pyproject.toml declares (and
    the matrix tests): each runtime dependency's lower bound, the Pythons of the classifiers."""
    pyproject = (REPO / "pyproject.toml").read_text()
    table = (REPO / "docs" / "installation.rst").read_text()
    block = re.search(r"^dependencies = \[\n(.*?)^\]", pyproject, re.M | re.S).group(1)
    entries = re.findall(r"""^  (["'].*["']),$""", block, re.M)
    declared = [re.match(r"""["']([A-Za-z0-9_.-]+)>=([0-9.]+)[;"']""", e).groups() for e in entries]
    assert len(declared) == len(entries) >= 6  # every dependency has a lower bound
    rows = dict(re.findall(r"^   \* - (\S+)\n     - (.+)$", table, re.M))
    for name, bound in declared:  # one bound per Python range where markers split them
        label = {"sphinx": "Sphinx"}.get(name, name)
        assert re.search(rf"(^|\(|: )>= {re.escape(bound)}\b", rows.get(label, "")), (name, bound, rows.get(label))
    pythons = re.findall(r'"Programming Language :: Python :: (3\.\d+)"', pyproject)
    assert rows["Python"] == f"{pythons[0]} to {pythons[-1]}"
    assert f"- {', '.join(pythons)}\n" in table
    assert re.search(rf'requires-python = ">={re.escape(pythons[0])}"', pyproject)

"""What ``convert`` carries from a d2lbook ``config.ini`` into the converted book's ``conf.py``.

d2lbook keeps a book's settings in ``config.ini``, Sphinx in ``conf.py``. Converting a tree
writes the settings livecells has a value for as conf.py assignments, between two marker lines of
the output's ``conf.py`` (made when there is none; converting again rewrites that block, and only
it):

- ``[build] tabs`` → ``livecells_frameworks``, each with livecells' defaults (its kernel is
  for the author to name, see docs/migrating-d2l.rst);
- ``[project] release`` → ``release``, as d2lbook's own conf.py has it (and what a Colab lib's
  ``==RELEASE`` stands for);
- ``[colab]`` and ``[sagemaker]``, each where its ``github_repo`` is set (else d2lbook makes no
  such notebooks) → ``livecells_hosted``: ``libs``, ``libs_header`` (``header``), ``gpu_pattern``,
  ``replace_svg_url`` (``images``), ``kernel``, with d2lbook's defaults for what the file leaves
  out, and each chapter's ``# required_libs(...)`` (``requires``); a SageMaker lib's
  ``==RELEASE`` is ``[library] version``, as in d2lbook;
- ``[colab] github_repo`` → ``livecells_launch["colab"]``: the URLs of d2lbook's Colab buttons;
- ``[slides]``, where its ``github_repo`` is set (else d2lbook makes no slides) →
  ``livecells_slides``: ``top_left``, ``top_right``, ``github_repo`` (a repository per tab);
- ``[library] version_file`` and each tab's ``[library-<tab>]`` (``lib_file``, ``lib_name`` and
  the aliases, as written) → ``livecells_library``, with each library file's hand-written head
  (what the book's file holds above d2lbook's warning line) as its ``header``, so that the
  library is made again from the pages alone. ``reverse_alias`` is not carried: d2lbook rewrites
  notebooks' code with it, never the library, and livecells shows the code as it ran.
"""

from __future__ import annotations

import configparser
import json
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from livecells.model.library import FILE_KEYS, head_of

BEGIN = "# -- From config.ini, by python -m livecells convert (converting again rewrites this block) --"
END = "# -- End of what convert wrote --"
#: d2lbook 1.0.3's defaults (its config_default.ini) of what livecells carries, as configparser reads them.
D2LBOOK_DEFAULTS = {
    "project": {"release": "0.0.1"},
    "colab": {
        "libs_header": "The following additional libraries are needed to run this\n"
        "notebook. Note that running on Colab is experimental, please report a Github\n"
        "issue if you have any problem.",
        "gpu_pattern": "gpu",
    },
    "sagemaker": {
        "kernel": "conda_python3",
        "libs_header": "Installing (updating) the following libraries for your Sagemaker\ninstance.",
    },
}
COLAB_URL = "https://colab.research.google.com/github/{repo}/blob/master/{{path}}"


def conf_values(
    ini: configparser.ConfigParser,
    tabs: list[str],
    requires: Mapping[str, list[str]],
    warn: Callable[[str], None],
    root: Path | None = None,
) -> dict[str, Any]:
    """The conf.py values of ``ini`` for a book of ``tabs``; ``requires``: per chapter (docname),
    its ``# required_libs``; ``root``: the book's folder, whose library files' heads are carried.
    ``warn`` is told of each line of a setting it cannot read."""

    def get(section: str, key: str) -> str:
        default = D2LBOOK_DEFAULTS.get(section, {}).get(key, "")
        return ini.get(section, key, fallback=default) if ini.has_section(section) else default

    values: dict[str, Any] = {}
    if ini.get("build", "tabs", fallback="").strip():
        values["livecells_frameworks"] = {tab: {} for tab in tabs}  # known ones keep their defaults
    if ini.has_option("project", "release"):
        values["release"] = ini.get("project", "release")
    hosted: dict[str, Any] = {}
    launch: dict[str, Any] = {}
    for service in ("colab", "sagemaker"):
        repo = get(service, "github_repo")
        if not repo.strip():
            continue
        # d2lbook's rule (parse_repo_lib): one repository for the book, or one per tab; the libs
        # follow suit, with the tab first on each line of a book of tabs.
        named = _rows(repo, None, "", warn)
        tabbed = not (len(named) == 1 and len(named[0]) == 1)
        where = f"[{service}] "
        if tabbed:
            repos = {r[0]: r[1] for r in _rows(repo, 2, where + "github_repo", warn) if r[0] in tabs}
            rows = [r for r in _rows(get(service, "libs"), 3, where + "libs", warn) if r[0] in tabs]
        else:
            repos = dict.fromkeys(tabs, repo.strip())
            rows = [[tab, *r] for tab in tabs for r in _rows(get(service, "libs"), 2, where + "libs", warn)]
        entry: dict[str, Any] = {}
        libs: dict[str, dict[str, str]] = {}
        for tab, pkg, install in rows:
            libs.setdefault(tab, {})[pkg] = install
        if libs:
            entry["libs"] = libs
        pinned = any("==RELEASE" in install for _, _, install in rows)
        if service == "colab":
            if pinned and "release" not in values:
                entry["release"] = get("project", "release")
            if get(service, "gpu_pattern"):
                entry["gpu_pattern"] = get(service, "gpu_pattern")
            images = _rows(get(service, "replace_svg_url"), 2, where + "replace_svg_url", warn)
            if images:
                entry["images"] = {images[0][0]: images[0][1]}
            launch[service] = {tab: COLAB_URL.format(repo=r) for tab, r in repos.items()}
        else:
            kernel = get(service, "kernel")
            if "," in kernel:  # d2lbook's rule: a kernel per tab
                entry["kernel"] = {r[0]: r[1] for r in _rows(kernel, 2, where + "kernel", warn) if r[0] in tabs}
            else:
                entry["kernel"] = kernel.strip()
            if pinned:
                entry["release"] = get("library", "version")
        if get(service, "libs_header"):
            entry["header"] = get(service, "libs_header")
        if requires:
            entry["requires"] = {page: list(args) for page, args in sorted(requires.items())}
        hosted[service] = entry
    if hosted:
        values["livecells_hosted"] = hosted
    if launch:
        values["livecells_launch"] = launch
    if get("slides", "github_repo").strip():  # d2lbook makes slides only then
        slides: dict[str, Any] = {key: get("slides", key) for key in ("top_left", "top_right") if get("slides", key)}
        rows = _rows(get("slides", "github_repo"), 2, "[slides] github_repo", warn)
        slides["github_repo"] = {tab: repo for tab, repo in rows if tab in tabs}
        values["livecells_slides"] = slides
    library = library_value(ini, tabs, root, warn)
    if library:
        values["livecells_library"] = library
    return values


#: d2lbook's [library] settings that livecells does not carry (deprecated in d2lbook 1.0.3).
_DEPRECATED = ("save_filename", "save_mark", "save_patterns", "root_dir", "version")


def library_value(
    ini: configparser.ConfigParser, tabs: list[str], root: Path | None, warn: Callable[[str], None]
) -> dict[str, Any]:
    """``livecells_library`` of ``[library]`` and the ``[library-<tab>]`` sections ({}: none)."""
    value: dict[str, Any] = {}
    if ini.has_section("library"):
        for key in _DEPRECATED:
            if ini.get("library", key, fallback="").strip():
                warn(f"config.ini [library] {key}: deprecated in d2lbook, not carried")
        if ini.get("library", "version_file", fallback="").strip():
            value["version_file"] = ini.get("library", "version_file").strip()
    for tab in tabs:
        section = f"library-{tab}"
        if not ini.has_section(section):
            continue
        entry = {key: ini.get(section, key) for key in FILE_KEYS if key != "header" and ini.has_option(section, key)}
        if not entry.get("lib_file", "").strip():
            warn(f"config.ini [{section}]: no lib_file: not carried")
            continue
        head = _library_head(root / entry["lib_file"].strip() if root is not None else None, warn)
        if head:
            entry["header"] = head
        value[tab] = entry
    return value


def _library_head(path: Path | None, warn: Callable[[str], None]) -> str | None:
    """What a library file holds above d2lbook's warning line (None: no file, or no such line)."""
    if path is None:
        return None
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as err:
        warn(f"{path}: cannot be read ({err}): its head is not carried")
        return None
    head = head_of(text)
    if head is None:
        warn(f"{path}: no d2lbook warning line: d2lbook's build lib would replace all of it; livecells leaves it as "
             "it is until livecells_library gives its 'header'")
    return head


def write_conf(folder: Path, values: Mapping[str, Any], extensions: list[str]) -> tuple[Path | None, list[str]]:
    """Write ``values`` into ``folder/conf.py`` as the block between :data:`BEGIN` and :data:`END`
    (the old block replaced, else the block added at the end; a new conf.py loads ``extensions``).
    A value that conf.py sets outside the block is the author's: left out. Returns the file (None:
    nothing written) and the names left out."""
    conf = folder / "conf.py"
    text = conf.read_text(encoding="utf-8") if conf.is_file() else f"extensions = {extensions!r}\n"
    lines = text.splitlines()
    start = lines.index(BEGIN) if BEGIN in lines else None
    end = lines.index(END, start) if start is not None and END in lines[start:] else None
    outside = "\n".join(lines if start is None or end is None else lines[:start] + lines[end + 1 :])
    theirs = [name for name in values if re.search(rf"^{re.escape(name)}\s*=", outside, re.M)]
    # JSON of strings, lists and dicts is Python too, and reads better than a repr.
    ours = {name: value for name, value in values.items() if name not in theirs}
    block = [f"{name} = {json.dumps(value, indent=4, ensure_ascii=False)}" for name, value in ours.items()]
    if not block and start is None:
        return None, theirs
    block = [BEGIN, *block, END]
    if start is not None and end is not None:
        lines[start : end + 1] = block
    else:
        lines += ["", *block]
    conf.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return conf, theirs


def _rows(value: str, size: int | None, where: str, warn: Callable[[str], None]) -> list[list[str]]:
    """A d2lbook list setting: a row per line, its items split at commas (``split_config_str``);
    a row of another ``size`` is left out, with a warning."""
    rows = []
    for number, line in enumerate(value.split("\n"), 1):
        items = [item.strip() for item in line.split(",") if item.strip()]
        if not items:
            continue
        if size is not None and len(items) != size:
            warn(f"config.ini {where}, line {number}: {len(items)} items, not {size}: left out")
            continue
        rows.append(items)
    return rows

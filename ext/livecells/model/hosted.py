"""Notebooks for hosted services (Colab, SageMaker): what each service's notebook of a page adds.

``livecells_hosted`` maps a service to its settings (:func:`hosted_service` checks one entry).
A service's notebook of a page is the page's download notebook of one framework with, as
d2lbook 1.0.3 makes them (``colab.py``, ``sagemaker.py``):

- an installation cell, first: ``!pip install ARGS`` for each of the framework's ``libs``
  whose module the notebook's code imports (``==RELEASE`` becomes ``==`` and the release), then
  one per entry of the page's ``requires`` (d2lbook's ``# required_libs(...)``), after a markdown
  ``header`` cell; none when nothing is to be installed;
- the kernelspec: ``kernel`` (Colab's is ``python3``, "Python 3");
- ``"accelerator": "GPU"`` in the metadata when a code cell holds ``gpu_pattern``;
- images under an ``images`` folder at their published URL (d2lbook's ``replace_svg_url``).

Every text an installation cell holds comes from the settings, never from a page. Nothing here
knows Sphinx: :func:`dress` works on a notebook as plain JSON data.
"""

from __future__ import annotations

import ast
import copy
import posixpath
import re
import string
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from livecells.model.launch import check_url

#: What a folder template may hold in braces.
FOLDER_PLACEHOLDERS = ("service", "framework")
#: Where a service's notebooks go by default, relative to the HTML output folder.
DEFAULT_FOLDER = "_hosted/{service}/{framework}"
#: The kernel a service's notebooks name when its settings name none (None: the framework's own).
DEFAULT_KERNELS = {"colab": "python3"}
#: What d2lbook writes in ``==RELEASE``'s place: ``==`` and the release.
RELEASE_MARK = "==RELEASE"
SETTINGS = ("folder", "libs", "requires", "header", "kernel", "gpu_pattern", "images", "release")

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_IMPORT_LINE = re.compile(r"^\s*(?:from\s+([A-Za-z_]\w*)[\w.]*\s+import\b|import\s+([A-Za-z_]\w*))")


@dataclass(frozen=True)
class HostedService:
    """One service's settings, checked. ``libs``: per framework, ``(module, pip arguments)`` in
    the order given; ``kernels``: per framework (``None``: every framework); ``images``:
    ``(folder, URL)``; ``requires``: per page (docname), pip arguments."""

    name: str
    folder: str = DEFAULT_FOLDER
    libs: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = ()
    requires: tuple[tuple[str, tuple[str, ...]], ...] = ()
    header: str = ""
    kernels: tuple[tuple[str | None, str], ...] = ()
    gpu_pattern: str = ""
    images: tuple[tuple[str, str], ...] = ()
    release: str | None = None

    def folder_of(self, framework: str) -> str:
        """The folder of the framework's notebooks (relative to the HTML output folder, or absolute)."""
        return self.folder.format(service=self.name, framework=framework)

    @staticmethod
    def notebook_path(docname: str) -> str:
        """Where a page's notebook lies in its folder: the launch links' ``{path}``."""
        return f"{docname}.ipynb"

    def kernelspec(self, framework: str, own: Mapping[str, str]) -> dict[str, str]:
        """The notebook's kernelspec: the service's kernel for ``framework`` (named as d2lbook
        names it: "Python 3" for ``python3``, else its name), else ``own``, the framework's."""
        kernels = dict(self.kernels)
        name = kernels.get(framework, kernels.get(None, DEFAULT_KERNELS.get(self.name)))
        if name is None:
            return dict(own)
        return {"name": name, "display_name": "Python 3" if name == "python3" else name}

    def installs(self, framework: str, code: Iterable[str], docname: str, release: str) -> list[str]:
        """The pip arguments of the installation cell: the framework's libs that ``code``
        imports (in the settings' order; one pinned ``==RELEASE`` only if there is a release),
        then the page's requirements."""
        imported = set().union(*(imported_modules(c) for c in code))
        found = [args for module, args in dict(self.libs).get(framework, ()) if module in imported]
        found = [args.replace(RELEASE_MARK, f"=={release}") for args in found if release or RELEASE_MARK not in args]
        return found + list(dict(self.requires).get(docname, ()))

    def needs_release(self) -> bool:
        """Whether a lib is pinned to the release (``==RELEASE``)."""
        return any(RELEASE_MARK in args for _, pairs in self.libs for _, args in pairs)

    def image_url(self, path: str) -> str | None:
        """The URL of a page's image (its path from the source folder) under ``images``, quoted;
        None if no folder of ``images`` holds it."""
        for folder, base in self.images:
            if not folder or path == folder or path.startswith(folder + "/"):
                rest = path[len(folder) :].lstrip("/")
                return base + "/" + quote(rest, safe="/")
        return None

    def raw(self) -> dict[str, Any]:
        """The entry as conf.py gives it."""
        kernels = dict(self.kernels)
        raw: dict[str, Any] = {
            "folder": self.folder,
            "libs": {fw: dict(pairs) for fw, pairs in self.libs},
            "requires": {doc: list(args) for doc, args in self.requires},
            "header": self.header,
            "gpu_pattern": self.gpu_pattern,
            "images": dict(self.images),
        }
        if kernels:
            raw["kernel"] = kernels[None] if list(kernels) == [None] else kernels
        if self.release is not None:
            raw["release"] = self.release
        return raw


def dress(
    notebook: Mapping[str, Any], service: HostedService, framework: str, docname: str,
    release: str, kernelspec: Mapping[str, str],
) -> dict[str, Any]:
    """The service's notebook made from a page's notebook of ``framework`` (nbformat 4 data):
    the installation cell and its header first, the kernelspec, the GPU accelerator."""
    # The cells are copied, not what they hold (outputs can be megabytes): only their ids change.
    cells = [dict(cell) for cell in notebook["cells"]]
    metadata = copy.deepcopy(dict(notebook.get("metadata", {})))
    dressed = {**notebook, "cells": cells, "metadata": metadata}
    code = [_text(c["source"]) for c in cells if c.get("cell_type") == "code"]
    metadata["kernelspec"] = dict(kernelspec)
    if service.gpu_pattern and any(service.gpu_pattern in c for c in code):
        metadata["accelerator"] = "GPU"
    metadata.setdefault("livecells", {})["service"] = service.name
    installs = service.installs(framework, code, docname, release)
    if installs:
        first = [{
            "cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
            "source": "".join(f"!pip install {args}\n" for args in installs),
        }]  # fmt: skip
        if service.header:
            first.insert(0, {"cell_type": "markdown", "metadata": {}, "source": service.header})
        cells[:0] = first
    for number, cell in enumerate(cells):
        cell["id"] = f"cell-{number}"
    return dressed


def imported_modules(code: str) -> set[str]:
    """The top-level modules a cell's code imports (``from d2l import torch`` → ``d2l``). Lines
    of IPython's own syntax (``%magic``, ``!shell``) are left out; code that still does not parse
    is read line by line, as d2lbook reads every cell."""
    lines = ["" if line.lstrip().startswith(("%", "!")) else line for line in code.split("\n")]
    try:
        tree = ast.parse("\n".join(lines))
    except (SyntaxError, ValueError):
        found = set()
        for line in lines:
            match = _IMPORT_LINE.match(line)
            if match:
                found.add(match[1] or match[2])
        return found
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module.split(".")[0])
    return found


def page_image_path(path: str, docname: str) -> str:
    """An image's path (from the source folder) relative to the page's notebook, quoted."""
    return quote(posixpath.relpath(path, posixpath.dirname(docname) or "."), safe="/")


# -- checking an entry -----------------------------------------------------------------------------


def hosted_service(name: Any, value: Any) -> HostedService:
    """One entry of ``livecells_hosted``, checked; ValueError says what is wrong with it."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValueError("the service's name must be letters, digits, '.', '_' or '-'")
    if not isinstance(value, Mapping):
        raise ValueError(f"must be a mapping of settings ({', '.join(SETTINGS)})")
    unknown = [key for key in value if key not in SETTINGS]
    if unknown:
        raise ValueError(f"unknown setting {unknown[0]!r}; the settings are {', '.join(SETTINGS)}")
    kernel = value.get("kernel")
    if kernel is None:
        kernels: tuple[tuple[str | None, str], ...] = ()
    elif isinstance(kernel, Mapping):
        kernels = tuple((_framework(fw, "kernel"), _kernel_name(k)) for fw, k in kernel.items())
    else:
        kernels = ((None, _kernel_name(kernel)),)
    release = value.get("release")
    return HostedService(
        name=name,
        folder=_folder(value.get("folder", DEFAULT_FOLDER)),
        libs=_libs(value.get("libs", {})),
        requires=_requires(value.get("requires", {})),
        header=_text_setting(value.get("header", ""), "header"),
        kernels=kernels,
        gpu_pattern=_text_setting(value.get("gpu_pattern", ""), "gpu_pattern"),
        images=_images(value.get("images", {})),
        release=None if release is None else _pip_args(release, "release", empty=True),
    )


def _folder(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError("folder: must be a non-empty string")
    try:
        parsed = list(string.Formatter().parse(value))
    except ValueError as err:
        raise ValueError(f"folder: its braces do not match ({err})") from None
    for _, field, spec, conversion in parsed:
        if field is not None and (field not in FOLDER_PLACEHOLDERS or spec or conversion):
            shown = ", ".join(f"{{{p}}}" for p in FOLDER_PLACEHOLDERS)
            raise ValueError(f"folder: unknown placeholder {{{field}}}; the placeholders are {shown}")
    _text_setting(value, "folder")
    return value


def _libs(value: Any) -> tuple[tuple[str, tuple[tuple[str, str], ...]], ...]:
    if not isinstance(value, Mapping):
        raise ValueError("libs: must be a mapping of framework -> {module: pip arguments}")
    libs = []
    for framework, modules in value.items():
        _framework(framework, "libs")
        if not isinstance(modules, Mapping):
            raise ValueError(f"libs: {framework}: must be a mapping of module -> pip arguments")
        pairs = []
        for module, args in modules.items():
            if not isinstance(module, str) or not module.isidentifier():
                raise ValueError(f"libs: {framework}: {module!r} is not a module's name")
            pairs.append((module, _pip_args(args, f"libs: {framework}: {module}")))
        libs.append((framework, tuple(pairs)))
    return tuple(libs)


def _requires(value: Any) -> tuple[tuple[str, tuple[str, ...]], ...]:
    if not isinstance(value, Mapping):
        raise ValueError("requires: must be a mapping of page (docname) -> list of pip arguments")
    pages = []
    for docname, args in value.items():
        if not isinstance(docname, str) or not docname or docname.startswith("/") or _CONTROL.search(docname):
            raise ValueError(f"requires: {docname!r} is not a page's name (its source path without the suffix)")
        if isinstance(args, str) or not isinstance(args, Sequence):
            raise ValueError(f"requires: {docname}: must be a list of pip arguments")
        pages.append((docname, tuple(_pip_args(a, f"requires: {docname}") for a in args)))
    return tuple(pages)


def _images(value: Any) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, Mapping):
        raise ValueError("images: must be a mapping of folder (from the source folder) -> URL")
    images = []
    for folder, url in value.items():
        if not isinstance(folder, str) or folder.startswith("/") or ".." in folder.split("/") or (
            _CONTROL.search(folder)
        ):
            raise ValueError(f"images: {folder!r} is not a folder relative to the source folder")
        try:
            base = check_url(url)
        except ValueError as err:
            raise ValueError(f"images: {folder}: {err}") from None
        if "(" in base or ")" in base:
            raise ValueError(f"images: {folder}: parentheses would end a markdown link")
        images.append((folder.strip("/"), base.rstrip("/")))
    return tuple(images)


def _framework(name: Any, setting: str) -> str:
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"{setting}: {name!r} is not a framework's name")
    return name


def _kernel_name(value: Any) -> str:
    if not isinstance(value, str) or not _NAME.fullmatch(value):
        raise ValueError(f"kernel: {value!r} is not a kernel's name (letters, digits, '.', '_', '-')")
    return value


def _pip_args(value: Any, where: str, empty: bool = False) -> str:
    """One line of an installation cell's arguments: text of one line, UTF-8."""
    if not isinstance(value, str) or not (value.strip() or empty):
        raise ValueError(f"{where}: must be a non-empty string")
    if _CONTROL.search(value):
        raise ValueError(f"{where}: must be one line, without control characters")
    return _text_setting(value.strip(), where)


def _text_setting(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{where}: must be a string")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{where}: holds characters that are not Unicode text (lone surrogates)") from None
    return value


def _text(source: Any) -> str:
    return "".join(source) if isinstance(source, list) else str(source)

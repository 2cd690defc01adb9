"""The environment fingerprint of a framework's kernel, found without starting a kernel.

It covers the kernelspec (name and command), the kernel's Python version, and the versions of the
distributions that provide the framework's preloaded modules, so that a library upgrade, a fresh
clone or a different interpreter is noticed (mtime-based caches miss all three). For the kernel
that runs this very interpreter (:func:`is_own_python`) it is computed in-process; for any other
kernelspec, by running its Python once on :mod:`livecells.kernel_side.interpreter`'s file.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Any

from livecells.kernel_side import interpreter
from livecells.kernel_side.template import BOOT
from livecells.model.frameworks import FrameworkSpec


@dataclass(frozen=True)
class Fingerprint:
    """What a framework's results depend on besides the code."""

    info: dict[str, Any]
    problem: str | None = None  # why the kernel cannot be used, if it cannot
    #: What :func:`evidence` reads to tell, without jupyter_client, that this still holds.
    sources: dict[str, Any] = field(default_factory=dict)
    proof: str = ""

    @property
    def digest(self) -> str:
        return hashlib.sha256(json.dumps(self.info, sort_keys=True).encode()).hexdigest()[:24]


def kernel_python(executable: str) -> str:
    """The interpreter that jupyter_client runs for a kernelspec whose ``argv[0]`` is
    ``executable``: this one for ``python``, ``python3`` and ``python3.X`` of this version (as
    jupyter_client's ``format_kernel_cmd`` does), else ``executable`` found on ``PATH``."""
    major, minor = sys.version_info[:2]
    if executable in {"python", f"python{major}", f"python{major}.{minor}"}:
        return sys.executable
    return shutil.which(executable) or executable


def is_own_python(executable: str) -> bool:
    """Whether a kernelspec's ``argv[0]`` runs this very Python, in this environment.

    Another name in this interpreter's own folder for the same binary (``.venv/bin/python3``
    beside ``.venv/bin/python``) is; the same binary reached from another folder is not (a
    virtual environment is found from the folder of the path run, so ``/usr/bin/python3`` is
    not this venv's Python, nor is a link to it elsewhere): in doubt, the kernel is asked.
    """
    path = kernel_python(executable)
    if not path:
        return False
    if path == sys.executable:
        return True
    if not os.path.exists(path):
        return False
    here = os.path.abspath(sys.executable)
    path = os.path.abspath(path)
    same_folder = os.path.realpath(os.path.dirname(path)) == os.path.realpath(os.path.dirname(here))
    return same_folder and os.path.realpath(path) == os.path.realpath(here)


def evidence(sources: dict[str, Any]) -> str:
    """A digest of what a fingerprint rests on: the kernelspec file, the interpreter, and the
    names of the installed distributions (``*.dist-info`` carry their versions), so that an
    upgrade, a new environment or an edited kernelspec changes it. Cheap: a few listdirs."""
    digest = hashlib.sha256()
    for path in [sources.get("kernel_json", ""), sources.get("executable", "")]:
        try:
            digest.update(path.encode() + open(path, "rb").read(65536) if path.endswith(".json") else
                          f"{path}:{os.stat(path).st_size}".encode())
        except OSError:
            digest.update(b"<missing>" + path.encode())
    for folder in sources.get("site_dirs", []):
        try:
            names = sorted(n for n in os.listdir(folder) if n.endswith((".dist-info", ".egg-info", ".pth")))
        except OSError:
            names = ["<missing>"]
        digest.update(folder.encode() + b"\0" + "\n".join(names).encode())
    return digest.hexdigest()


def cached_fingerprint(cache_file: str | os.PathLike[str], framework: FrameworkSpec) -> Fingerprint:
    """``framework``'s fingerprint from ``cache_file`` while its evidence holds, else computed
    anew (and the file updated). The file survives ``-E``; it is only a cache."""
    key = json.dumps([framework.kernel, sorted(framework.preload)])
    try:
        with open(cache_file, encoding="utf-8") as handle:
            cache = json.load(handle)
    except (OSError, ValueError):
        cache = {}
    found = cache.get(key) if isinstance(cache, dict) else None
    if _well_formed(found) and evidence(found["sources"]) == found["proof"]:
        return Fingerprint(found["info"], found.get("problem"), found["sources"], found["proof"])
    fresh = fingerprint(framework)
    if fresh.proof:
        cache = cache if isinstance(cache, dict) else {}
        cache[key] = {"info": fresh.info, "problem": fresh.problem, "sources": fresh.sources, "proof": fresh.proof}
        try:
            os.makedirs(os.path.dirname(os.fspath(cache_file)) or ".", exist_ok=True)
            tmp = f"{os.fspath(cache_file)}.{os.getpid()}.tmp"
            with open(tmp, "w", encoding="utf-8") as handle:
                json.dump(cache, handle)
            os.replace(tmp, cache_file)
        except OSError:
            pass
    return fresh


def _well_formed(found: Any) -> bool:
    """Whether a cached entry has the shape this module writes (a damaged cache is recomputed)."""
    if not isinstance(found, dict) or not isinstance(found.get("proof"), str) or not found["proof"]:
        return False
    sources, info = found.get("sources"), found.get("info")
    if not isinstance(sources, dict) or not isinstance(info, dict):
        return False
    if not all(isinstance(sources.get(k, ""), str) for k in ("kernel_json", "executable")):
        return False
    dirs = sources.get("site_dirs", [])
    return (isinstance(dirs, list) and all(isinstance(d, str) for d in dirs)
            and isinstance(found.get("problem"), (str, type(None))))


def fingerprint(framework: FrameworkSpec) -> Fingerprint:
    """The fingerprint of ``framework``'s kernel; ``problem`` is set when it cannot run."""
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    modules = sorted({m.split(".")[0] for m in framework.preload})
    try:
        spec = KernelSpecManager().get_kernel_spec(framework.kernel)
    except NoSuchKernel:
        return Fingerprint(
            {"kernel": framework.kernel}, problem=f"no kernelspec named {framework.kernel!r}"
        )
    argv = list(spec.argv)
    executable = argv[0] if argv else ""
    if is_own_python(executable):
        details = interpreter.details(modules)
    else:
        try:
            out = subprocess.run(
                [executable, "-c", BOOT, interpreter.__file__, json.dumps(modules)],
                capture_output=True,
                text=True,
                timeout=60,
                check=True,
            ).stdout
            details = json.loads(out.strip().splitlines()[-1])
        except (OSError, subprocess.SubprocessError, ValueError, IndexError) as err:
            return Fingerprint(
                {"kernel": framework.kernel, "argv": argv},
                problem=f"the kernel's Python {executable!r} could not be queried ({err})",
            )
    missing = [m for m, v in details["packages"].items() if not v]
    info = {
        "kernel": framework.kernel,
        "language": spec.language,
        "python": details["python"],
        "packages": details["packages"],
    }
    problem = None
    if missing:
        problem = (
            f"framework {framework.name!r}: {', '.join(missing)} not installed for kernel "
            f"{framework.kernel!r} ({details['executable']})"
        )
    sources = {
        "kernel_json": os.path.join(spec.resource_dir, "kernel.json"),
        "executable": details["executable"],
        "site_dirs": details.get("site_dirs", []),
    }
    return Fingerprint(info, problem, sources, evidence(sources))

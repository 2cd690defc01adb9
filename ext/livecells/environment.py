"""The environment fingerprint of a framework's kernel, found without starting a kernel.

It covers the kernelspec (name and command), the kernel's Python version, and the versions of the
distributions that provide the framework's preloaded modules, so that a library upgrade, a fresh
clone or a different interpreter is noticed (mtime-based caches miss all three). For the kernel
that runs this very interpreter it is computed in-process; for any other kernelspec, by running
its Python once with a short script.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

from .config import FrameworkSpec

PROBE_SCRIPT = r"""
import json, platform, sys
from importlib import metadata
def version(module):
    try:
        return metadata.version(module)
    except Exception:
        pass
    try:
        dists = metadata.packages_distributions().get(module, [])
        return metadata.version(dists[0]) if dists else ""
    except Exception:
        return ""
mods = json.loads(sys.argv[1])
print(json.dumps({"python": platform.python_version(), "executable": sys.executable,
                  "packages": {m: version(m) for m in mods}}))
"""


@dataclass(frozen=True)
class Fingerprint:
    """What a framework's results depend on besides the code."""

    info: dict[str, Any]
    problem: str | None = None  # why the kernel cannot be used, if it cannot

    @property
    def digest(self) -> str:
        return hashlib.sha256(json.dumps(self.info, sort_keys=True).encode()).hexdigest()[:24]


def _in_process(modules: list[str]) -> dict[str, Any]:
    from importlib import metadata

    def version(module: str) -> str:
        try:
            return metadata.version(module)
        except metadata.PackageNotFoundError:
            pass
        dists = metadata.packages_distributions().get(module, [])
        try:
            return metadata.version(dists[0]) if dists else ""
        except metadata.PackageNotFoundError:
            return ""

    return {
        "python": platform.python_version(),
        "executable": sys.executable,
        "packages": {m: version(m) for m in modules},
    }


def fingerprint(framework: FrameworkSpec) -> Fingerprint:
    """The fingerprint of ``framework``'s kernel; ``problem`` is set when it cannot run."""
    modules = sorted({m.split(".")[0] for m in framework.preload})
    try:
        spec = KernelSpecManager().get_kernel_spec(framework.kernel)
    except NoSuchKernel:
        return Fingerprint(
            {"kernel": framework.kernel}, problem=f"no kernelspec named {framework.kernel!r}"
        )
    argv = list(spec.argv)
    executable = argv[0] if argv else ""
    same = executable in {"python", "python3", sys.executable} or (
        os.path.exists(executable) and os.path.realpath(executable) == os.path.realpath(sys.executable)
    )
    if same:
        details = _in_process(modules)
    else:
        try:
            out = subprocess.run(
                [executable, "-c", PROBE_SCRIPT, json.dumps(modules)],
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
    return Fingerprint(info, problem)

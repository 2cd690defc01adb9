"""`make test-matrix`: livecells as a user installs it, on every supported Python, at both ends of
its dependency ranges.

Builds the sdist and, from it, the wheel (`uv build`), checks their metadata (`twine check
--strict`), then for each Python that pyproject.toml's classifiers list and each resolution
(`lowest-direct`: every dependency that livecells declares at its lower bound; `highest`):
installs the wheel, never editable, into a fresh venv; builds tests/matrix/book (two pages, NumPy
and plain Python, real kernels) with `-W` and DeprecationWarnings from livecells' own modules as
errors, and checks the live outputs in its HTML; runs the tests not marked `frameworks` (those
need torch or mxnet), `frameworks_extra` (TensorFlow/JAX environments) or `wallclock` (bounds on
elapsed time, which combinations sharing the cores can miss); the full suite runs on the main
venv. A supported Python that this machine lacks is reported and skipped (a failure with
--require-all). Stdlib only: run by any Python.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import email.parser
import html.parser
import json
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[2]
BOOK = Path(__file__).resolve().parent / "book"
RESOLUTIONS = ("lowest-direct", "highest")
#: The tests each combination runs (pytest -m): see the module's docstring.
SELECTED = "not frameworks and not frameworks_extra and not wallclock"
#: Versions shown in the summary: what the support table in docs/installation.rst states.
SHOWN = ("sphinx", "docutils", "sphinx-design", "jupyter-client", "ipykernel", "ipython", "pyzmq", "traitlets")
#: What the matrix book's pages must show: live outputs only (the recorded ones say RECORDED).
EXPECTED = {
    "index.html": ["numpy sum 105", "python sum 165"],
    "second.html": ["numpy trace 12", "'live-cells!!!'"],
}


def supported_pythons() -> list[str]:
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    prefix = "Programming Language :: Python :: "
    found = [c[len(prefix) :] for c in meta["classifiers"] if re.fullmatch(re.escape(prefix) + r"3\.\d+", c)]
    return sorted(found, key=lambda v: tuple(map(int, v.split("."))))


def find_python(version: str) -> str | None:
    """This machine's interpreter for `version`: pyenv's, else `pythonX.Y` on PATH. Never downloads."""
    candidates = []
    pyenv = shutil.which("pyenv")
    if pyenv:
        done = subprocess.run([pyenv, "prefix", version], capture_output=True, text=True)
        if done.returncode == 0:
            candidates += [str(Path(p.strip()) / "bin" / "python") for p in done.stdout.split(":") if p.strip()]
    if shutil.which(f"python{version}"):
        candidates.append(shutil.which(f"python{version}"))
    for candidate in candidates:
        probe = subprocess.run(
            [candidate.strip(), "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], capture_output=True, text=True
        )
        if probe.returncode == 0 and probe.stdout.strip() == version:
            return candidate.strip()
    return None


def runtime_requirements(wheel: Path) -> list[str]:
    """The wheel's own dependencies (no extras'), passed to uv as direct requirements so that
    `lowest-direct` lowers each to its declared bound (a wheel's dependencies count as indirect)."""
    with zipfile.ZipFile(wheel) as zf:
        name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        meta = email.parser.Parser().parsestr(zf.read(name).decode())
    return [r for r in meta.get_all("Requires-Dist", []) if "extra ==" not in r]


def own_modules(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as zf:
        names = [n[: -len(".py")].replace("/", ".") for n in zf.namelist() if n.endswith(".py")]
    return sorted(n.removesuffix(".__init__") for n in names if n.startswith("livecells"))


def warning_filters(modules: list[str]) -> str:
    """PYTHONWARNINGS: deprecations reported against livecells' own modules are errors (the
    module field of PYTHONWARNINGS is matched exactly, so one entry per module)."""
    return ",".join(f"error::{kind}:{m}" for m in modules for kind in ("DeprecationWarning", "PendingDeprecationWarning"))


class Combo:
    def __init__(self, work: Path, version: str, python: str, resolution: str) -> None:
        self.version, self.python, self.resolution = version, python, resolution
        self.name = f"py{version}-{resolution}"
        self.dir = work / self.name
        self.log = self.dir / "log.txt"
        self.result = "not run"
        self.versions: dict[str, str] = {}
        self.seconds = 0.0

    def run(self, argv: list[str], **kwargs) -> None:
        with self.log.open("a") as log:
            log.write(f"\n$ {' '.join(argv)}\n")
            log.flush()
            done = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, **kwargs)
        if done.returncode != 0:
            raise Failed(f"{Path(argv[0]).name} {' '.join(argv[1:3])} exited {done.returncode}")


class Failed(Exception):
    pass


def leftover_processes(prefix: Path, grace: float = 10.0) -> list[str]:
    """Processes whose command line runs from `prefix` (the combo's venv) `grace` seconds after a
    step ended (multiprocessing's resource tracker exits just after its parent): none may be left."""
    deadline = time.monotonic() + grace
    while (found := _running_from(prefix)) and time.monotonic() < deadline:
        time.sleep(0.5)
    return found


def _running_from(prefix: Path) -> list[str]:
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if cmdline and cmdline[0].decode(errors="replace").startswith(str(prefix)):
            found.append(f"{proc.name}: {b' '.join(cmdline).decode(errors='replace')[:200]}")
    return found


class Outputs(html.parser.HTMLParser):
    """The text of a page's cell outputs (elements of class ``livecells-output``), one per output."""

    def __init__(self) -> None:
        super().__init__()
        self.outputs: list[str] = []
        self.depth = 0  # open elements inside the current output; 0: outside any

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if self.depth:
            self.depth += tag not in VOID
        elif "livecells-output" in (dict(attrs).get("class") or "").split():
            self.outputs.append("")
            self.depth = 1

    def handle_endtag(self, tag: str) -> None:
        if self.depth and tag not in VOID:
            self.depth -= 1

    def handle_data(self, data: str) -> None:
        if self.depth:
            self.outputs[-1] += data


VOID = {"br", "img", "hr", "meta", "link", "input", "wbr", "source", "col", "area", "base", "embed"}


def check_book(out: Path, version: str) -> None:
    for page, expected in EXPECTED.items():
        text = (out / page).read_text(encoding="utf-8")
        parser = Outputs()
        parser.feed(text)
        shown = [o.strip() for o in parser.outputs]
        missing = [e for e in expected if not any(e in o for o in shown)]
        # Once per framework's kernel: the interpreter under test; forked from the fork server's
        # template.
        twice = {"index.html": f"python {version}", "second.html": "forked True"}[page]
        if sum(o == twice for o in shown) != 2:
            missing.append(f"{twice} (twice: both frameworks' kernels)")
        if missing:
            raise Failed(f"{page} lacks the live outputs {missing}; its outputs: {shown}")
        if "RECORDED" in text:
            raise Failed(f"{page} shows a recorded output, not the live one")
        if page == "index.html" and not re.search(r"numpy \d+\.\d+", text):
            raise Failed(f"{page} lacks the timing line with NumPy's version")


def run_combo(combo: Combo, uv: str, wheel: Path, modules: list[str]) -> Combo:
    start = time.monotonic()
    shutil.rmtree(combo.dir, ignore_errors=True)
    combo.dir.mkdir(parents=True)
    venv = combo.dir / "venv"
    py = str(venv / "bin" / "python")
    env = dict(os.environ, VIRTUAL_ENV=str(venv), OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    env.pop("PYTHONPATH", None)
    env.pop("PIP_FIND_LINKS", None)
    try:
        combo.run([uv, "venv", "--no-python-downloads", "--python", combo.python, str(venv)])
        combo.run(
            [uv, "pip", "install", "--python", py, "--resolution", combo.resolution, f"{wheel}[test,docs]"]
            + runtime_requirements(wheel),
            env=env,
        )
        frozen = subprocess.run([uv, "pip", "freeze", "--python", py], capture_output=True, text=True).stdout
        with combo.log.open("a") as log:
            log.write(frozen)
        for line in frozen.splitlines():
            name, _, version = line.partition("==")
            if name.lower().replace("_", "-") in SHOWN:
                combo.versions[name.lower().replace("_", "-")] = version
        book = combo.dir / "book"
        shutil.copytree(BOOK, book)
        build_env = dict(env, PYTHONWARNINGS=warning_filters(modules))
        combo.run([py, "-m", "sphinx", "-W", "--keep-going", "-b", "html", str(book), str(book / "_build")], env=build_env)
        check_book(book / "_build", combo.version)
        if left := leftover_processes(venv):
            raise Failed(f"processes outlived the build: {left}")
        # From the checkout's root: its tests, the wheel's livecells (ext/ is not on the path).
        # Not the wall-clock bounds: two combinations share the cores (make test checks them).
        # Render snapshots hold one stack's doctree text: other stacks skip them (see the test).
        combo.run(
            [py, "-m", "pytest", "-q", "-ra", "-n", "0", "-p", "no:cacheprovider", "-m", SELECTED, "tests"],
            # LIVECELLS_UV: the plug-in tests install their packages with it (no pip here).
            env=dict(build_env, LIVECELLS_SNAPSHOT_ANY_STACK="1", LIVECELLS_UV=uv),
            cwd=ROOT,
        )
        if left := leftover_processes(venv):
            raise Failed(f"processes outlived the tests: {left}")
        combo.result = "passed"
    except Failed as failure:
        combo.result = f"FAILED: {failure}"
    except Exception as error:  # the matrix reports it and goes on with the next combination
        combo.result = f"FAILED: {type(error).__name__}: {error}"
    finally:
        combo.seconds = time.monotonic() - start
    return combo


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--uv", default=shutil.which("uv") or "uv")
    parser.add_argument("--twine", default=shutil.which("twine", path=str(Path(sys.executable).parent)) or "twine")
    parser.add_argument("--work", type=Path, default=ROOT / "_build" / "matrix")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--python", action="append", help="only these Pythons (default: the classifiers')")
    parser.add_argument("--resolution", action="append", choices=RESOLUTIONS)
    parser.add_argument("--require-all", action="store_true", help="a supported Python missing here fails")
    args = parser.parse_args()
    # Absolute: the tests run uv from folders of their own (make passes .venv/bin/uv).
    args.uv = str(Path(shutil.which(args.uv) or args.uv).resolve())
    start = time.monotonic()
    shutil.rmtree(args.work, ignore_errors=True)
    dist = args.work / "dist"
    dist.mkdir(parents=True)
    # The sdist first, then the wheel from the unpacked sdist: a file the sdist lacks fails here.
    subprocess.run([args.uv, "build", "--out-dir", str(dist), str(ROOT)], check=True)
    subprocess.run([args.twine, "check", "--strict", *map(str, sorted(dist.glob("livecells-*")))], check=True)
    wheel = next(dist.glob("*.whl"))
    modules = own_modules(wheel)
    combos, missing = [], []
    for version in args.python or supported_pythons():
        python = find_python(version)
        if python is None:
            missing.append(version)
            print(f"matrix: NO PYTHON {version} ON THIS MACHINE: its combinations are SKIPPED", flush=True)
            continue
        combos += [Combo(args.work, version, python, r) for r in args.resolution or RESOLUTIONS]
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        futures = [pool.submit(run_combo, c, args.uv, wheel, modules) for c in combos]
        for future in concurrent.futures.as_completed(futures):
            combo = future.result()
            print(f"matrix: {combo.name}: {combo.result} ({combo.seconds:.0f} s)", flush=True)
            if combo.result != "passed":
                print(f"--- last lines of {combo.log}:")
                print("\n".join(combo.log.read_text(errors="replace").splitlines()[-60:]), flush=True)
    print(f"\nmatrix: {len(combos)} combinations in {time.monotonic() - start:.0f} s (wheel {wheel.name})")
    for combo in combos:
        versions = " ".join(f"{k} {v}" for k, v in sorted(combo.versions.items()))
        print(f"  {combo.name:22} {combo.result:8} {combo.seconds:5.0f} s  {versions}")
    summary = [vars(c) | {"dir": str(c.dir), "log": str(c.log)} for c in combos]
    (args.work / "summary.json").write_text(json.dumps(summary, indent=1))
    passed = sum(c.result == "passed" for c in combos)
    failed = len(combos) - passed + (len(missing) if args.require_all else 0)
    print(f"matrix: {passed} passed, {failed} failed", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""Template side of the fork server: the program a template process runs (see
:mod:`livecells.execute.forkserver.server`).

A template imports ipykernel and a framework once, then forks a kernel per launch request; each
child leaves the template's loop, becomes a fresh kernel (own session, environment, cwd,
streams, random seeds) and runs ipykernel. The launcher starts it as
``python -c BOOT template.py MARKER SOCKET LAUNCHER_PID MODULES_JSON``
(``MODULES_JSON``: ``{"kernel": [...], "preload": [...], "warm": ...}``, ``warm`` as
:class:`~livecells.kernel_side.lifetime.Lifetime` takes it: how a template kept warm ends)
(:data:`BOOT` runs this file by its path, in ``__main__``, as ``python template.py`` would,
without putting this file's folder on ``sys.path``). The child starts ipykernel as
``python -m ipykernel_launcher`` does (``IPKernelApp.launch_instance``).

A preload is shared only where that changes nothing a cell can see (:func:`shareable`): what it
imports that asks for IPython's shell as it is imported (``matplotlib_inline``'s backend registers
the inline figure hook, ``tqdm.autonotebook`` picks its notebook bar), and what imports that, is
left to each kernel, which imports the preload once its shell exists (``hook.install``). What the
shared imports print is shown with the kernel's first cell, as a fresh kernel's first import.
How the template finds and records what it shares is :mod:`livecells.kernel_side.sharing`.

It runs in the kernel's own Python, which need not have livecells installed: it imports only the
standard library, and :mod:`~livecells.kernel_side.reaper`, :mod:`~livecells.kernel_side.sharing` and
:mod:`~livecells.kernel_side.lifetime` (standard library too) by their paths, beside this file.
Imported in the build process (by tests), it runs nothing.
"""

from __future__ import annotations

import sys

if __name__ == "__main__" and sys.path[:1] == [""]:
    # As ipykernel_launcher does (the kernel's init_path adds the cwd back); before any other
    # import, so that no file in the build's folder stands in for the standard library.
    del sys.path[0]

import atexit
import gc
import importlib
import importlib.util
import json
import os
import random  # noqa: F401 - reseeded in every child (sys.modules["random"]), see reseed()
import select
import signal
import socket
import traceback
from collections.abc import Mapping
from typing import Any

#: How a kernel-side file runs in another Python: ``python -c BOOT FILE ARGS...`` (this file, and
#: kernel_side/interpreter.py). As ``python FILE`` would, in ``__main__``, compiled with the file's
#: path (tracebacks name it), but ``sys.path[0]`` stays the cwd's ``""`` rather than FILE's folder
#: (where execute/dask.py would stand in for dask); a forked child is three frames below
#: ipykernel's ``launch_new_instance``, as under ``python -m ipykernel_launcher``.
BOOT = "import sys; __file__ = sys.argv[1]; exec(compile(open(__file__, 'rb').read(), __file__, 'exec'))"


def _beside(name: str) -> Any:
    """The module in file ``name`` beside this one, loaded by path (not put in ``sys.modules``)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), name)
    spec = importlib.util.spec_from_file_location(f"_livecells_{name.removesuffix('.py')}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


if __name__ == "__main__":
    bytecode = _beside("bytecode.py")
    reaper = _beside("reaper.py")
    sharing = _beside("sharing.py")
    lifetime = _beside("lifetime.py")
else:
    from livecells.kernel_side import bytecode, lifetime, reaper, sharing


def main(argv: list[str]) -> tuple[Any, ...] | None:
    """Import, say ready (or why not) on stdout, then serve launch requests until told to stop.

    In a forked child it returns :func:`child`'s arguments: the child leaves the template's
    frames before it becomes a kernel, so that cells run at a normal kernel's stack depth.
    """
    global _stopping
    path, parent, modules = argv[0], int(argv[1]), json.loads(argv[2])
    # Die with the launcher, even in the middle of a slow import; and adopt the orphans of
    # kernels that die (they are killed in _reap).
    reaper.die_with_parent(signal.SIGKILL)
    reaper.set_subreaper()
    if os.getppid() != parent:
        return
    # Stdout carries the ready line only: what the imports or config files print (a banner)
    # goes to the log, as a fresh kernel's goes to its own.
    ready = os.dup(1)
    os.dup2(2, 1)
    environ = dict(os.environ)  # what the imports saw
    # What ipykernel sets before a user imports matplotlib; a preload may import it.
    os.environ.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    problem, left = None, {}
    bytecode.install(sharing.installed_folders())  # before a book's module is imported, as in a kernel
    try:
        for name in modules["kernel"]:
            importlib.import_module(name)
        roots, left = shareable(modules["preload"], modules.get("probe_cache"))
        before = set(sys.modules)
        with sharing.captured() as output:
            for name in roots:
                importlib.import_module(name)
        problem = sharing.cuda_touched() or sharing.unshared_imported(set(sys.modules) - before, left)
        sharing.stash_output(output)
    except BaseException:  # noqa: BLE001 - any import failure is reported, not raised
        problem = "a preload import failed:\n" + traceback.format_exc(limit=-3)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    if problem is None:
        listener.bind(path)
        listener.listen(64)
    sys.stdout.flush()  # before any fork: nothing buffered may be written twice
    # The files the kernels will run as the template read them: a launcher must not fork from a
    # template whose imported code has changed since (see ForkServer.launch).
    files = sharing.imported_files(sys.modules, sharing.installed_folders()) if problem is None else {}
    said = {"error": problem, "files": files, "left": left}
    if modules.get("warm") and problem is None:  # what later builds check before they adopt it
        said["installed"] = sharing.installed_state(sys.modules)
    os.write(ready, (json.dumps(said) + "\n").encode())
    os.close(ready)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)
    if problem is not None:
        return
    # What the imports set in the environment (debugpy sets PYDEVD_USE_FRAME_EVAL): a fresh
    # kernel's imports would set it too. Not MPLBACKEND, the template's own (the kernel sets it).
    environ["MPLBACKEND"] = os.environ.get("MPLBACKEND")
    imported_env = imported_changes(environ, os.environ)
    sys.stderr.flush()  # nothing buffered may be written twice, by a child too
    gc.freeze()  # keep the imported objects' pages shared with the children
    # fds open now belong to the imported libraries (children keep them); later ones are ours.
    keep = {int(fd) for fd in os.listdir("/proc/self/fd")} - {listener.fileno()}
    keep = {fd for fd in keep if _is_open(fd)}  # not the fd that listed them

    signal.signal(signal.SIGTERM, _stop)
    # From now on the launcher's death ends the loop through SIGTERM, so that the kernels'
    # process trees are killed before the kernels themselves die (their PR_SET_PDEATHSIG).
    # A template kept warm outlives its launcher: its owner and idle time end it (lifetime.py).
    life = lifetime.Lifetime(parent, modules.get("warm"), reaper)
    reaper.die_with_parent(0 if life.warm else signal.SIGTERM)
    if os.getppid() != parent:
        return
    children: dict[int, int | None] = {}
    template, become = os.getpid(), None
    try:
        while life.goes_on(children):  # (a build's own) the launcher died without close(): go too
            _reap(children)
            life.orphaned(children)
            if not _readable(listener, 1.0):
                continue
            life.used()
            conn, _ = listener.accept()
            conn.settimeout(10)  # a client that says nothing must not block the others
            with conn:
                become = _serve(conn, listener, keep, children, life)
            if become is not None:  # in the forked child
                return (*become, imported_env, parent)
    finally:
        # First, with no call before it (Python runs a signal's handler at a call or a jump): from
        # here on a SIGTERM is ignored, also when the loop ended because the launcher died.
        _stopping = True
        if os.getpid() == template:
            _stop_children(children, path)
            life.close(path)
        elif become is None:  # a child that failed on its way out: never into the template's code
            os._exit(1)
    return None


def shareable(preload: list[str], cache: str | None = None) -> tuple[list[str], dict[str, str]]:
    """What of ``preload`` the template may import: the modules it pulls in, in import order,
    less those that use IPython's shell as they are imported and those that import them; and
    the preloads left to each kernel, with why. Found by importing ``preload`` in a forked probe
    child (the template's own imports cannot be undone), or kept from an earlier template's
    probe at ``cache`` while nothing it rests on changed (:func:`sharing.cached_probe`)."""
    if not preload:
        return [], {}
    found = sharing.cached_probe(cache, preload) if cache else None
    if found is None:
        found = _probe(preload)
        if cache and not found["error"]:
            sharing.keep_probe(cache, preload, found)
    if found["error"]:
        raise ImportError(f"in the probe: {found['error']}")
    return sharing.shared_roots(found["order"], found["parent"], found["unsafe"], preload)


def _probe(preload: list[str]) -> dict[str, Any]:
    """The probe's answer: ``preload`` imported in a forked child (:func:`sharing.probe_imports`)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the probe: never back into the template's code
        code = 1
        try:
            os.close(read)
            reaper.die_with_parent(signal.SIGKILL)
            null = os.open(os.devnull, os.O_WRONLY)  # the template's own imports print it all
            os.dup2(null, 1)
            os.dup2(null, 2)
            found = sharing.probe_imports(preload)
            os.write(write, json.dumps(found).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        data = pipe.read()
    _, status = os.waitpid(pid, 0)
    if status != 0 or not data:
        raise RuntimeError(f"the probe of the preloads' imports failed (exit status {status})")
    return json.loads(data)  # type: ignore[no-any-return]


#: Set once the template stops: the SIGTERMs that come after are ignored (see :func:`_stop`).
_stopping = False


def _stop(signum: int, frame: object) -> None:
    """SIGTERM: leave the loop, once. More SIGTERMs come: PR_SET_PDEATHSIG follows the parent
    *thread*, and a launcher killed with all its threads sends one as each thread ends (one per
    thread, measured); one raised inside :func:`_stop_children` would end it half-way, with a
    kernel stopped but not killed and the other kernels' trees not killed at all."""
    global _stopping
    if _stopping:
        return
    _stopping = True
    raise SystemExit(0)


def _stop_children(children: dict[int, int | None], path: str) -> None:
    _kill_orphans(children)
    for pid, code in children.items():
        if code is None:
            try:
                reaper.kill_tree(pid)  # what left the kernel's process group too
            except Exception:  # noqa: BLE001 - it was killed (kill_tree): on to the next
                traceback.print_exc()
    for pid, code in children.items():
        if code is None:
            try:
                os.waitpid(pid, 0)
            except OSError:
                pass
    try:
        os.unlink(path)
    except OSError:
        pass


def _readable(sock: Any, timeout: float) -> bool:
    try:
        return bool(select.select([sock], [], [], timeout)[0])
    except InterruptedError:
        return False


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def _reap(children: dict[int, int | None]) -> None:
    """Collect exit statuses (Popen convention: -signal or the exit code); kill what a kernel
    that died left behind (its orphans come here: the template is a subreaper)."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            break
        if pid in children:
            children[pid] = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
    _kill_orphans(children)


def _kill_orphans(children: dict[int, int | None]) -> None:
    """Kill the tree of every child of the template that is no kernel of it: an orphan of a
    kernel that died. Looked for on every turn of the loop, not only when a kernel ends: a
    process of that kernel that forked while its tree was being killed is handed here later."""
    me = os.getpid()
    for pid, (ppid, state) in reaper.process_table().items():
        if ppid == me and pid not in children and state not in "ZX":
            reaper.kill_tree(pid)


def _serve(
    conn: Any, listener: Any, keep: set[int], children: dict[int, int | None], life: Any = None
) -> tuple[Any, ...] | None:
    """Answer one request: ``launch`` (fork a kernel), ``status`` (of a kernel forked here) or
    ``hello`` (which template answers: a build that adopts a template kept warm asks first).

    In the forked child it returns at once with :func:`child`'s arguments (its own copies of
    the passed fds, which the template's copies closing here leave open).
    """
    data, fds, _, _ = socket.recv_fds(conn, 1 << 20, 2)
    while data and not data.endswith(b"\n"):
        chunk = conn.recv(1 << 20)
        if not chunk:
            break
        data += chunk
    try:
        request = json.loads(data)
        if request["op"] == "status":
            _reap(children)
            reply: dict[str, Any] = {"returncode": children[request["pid"]]}
        elif request["op"] == "hello":
            reply = {"pid": os.getpid()}
        elif not os.path.isdir(request["cwd"]):
            reply = {"error": f"no such directory: {request['cwd']}"}
        else:
            template = os.getpid()
            # No SIGTERM between the fork and the bookkeeping: close() relies on the record.
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
            try:
                pid = os.fork()
                if pid == 0:  # the child returns only to leave the template's loop (see main)
                    try:
                        return (request, [os.dup(fd) for fd in fds], conn, listener, keep, template)
                    except BaseException:
                        os._exit(1)
                children[pid] = None
                if life is not None:
                    life.launched(pid, request)
            finally:  # also when the fork failed (EAGAIN): SIGTERM must still end the template
                if os.getpid() == template:  # the child unblocks it itself (child())
                    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
            reply = {"pid": pid}
    except Exception as err:  # noqa: BLE001 - a bad request gets an answer, not a dead template
        reply = {"error": f"{type(err).__name__}: {err}"}
    finally:
        for fd in fds:
            os.close(fd)
    conn.sendall((json.dumps(reply) + "\n").encode())


def child(
    request: dict[str, Any],
    fds: list[int],
    conn: Any,
    listener: Any,
    keep: set[int],
    parent: int,
    imported_env: Mapping[str, list[Any]],
    launcher: int = 0,
) -> None:
    """Become a fresh kernel: own session, env, cwd, streams and seeds; then run ipykernel's
    own start-up, as ``python -m ipykernel_launcher`` does.

    The kernel outlives its template (``parent``): a cell that kills or stops the template costs
    no other session its kernel. It dies with the ``launcher`` instead: the template kills its
    kernels when the launcher dies, the build's guard kills each kernel's tree, and ipykernel's
    parent poller, told the launcher's pid, ends the kernel once it is left to PID 1.
    """
    code = 1
    try:
        os.setsid()
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGCHLD):
            signal.signal(signum, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
        # The template's PR_SET_PDEATHSIG is not inherited (fork clears it), and none is set
        # here: a template that dies leaves its kernels to the launcher (a subreaper).
        if os.getppid() != parent:  # it died at the fork: the launcher may never have heard of us
            return
        null = os.open(os.devnull, os.O_RDWR)
        out, err = streams(fds, null)
        os.dup2(null, 0)
        os.dup2(out, 1)
        os.dup2(err, 2)
        listener.close()
        conn.close()
        for fd in os.listdir("/proc/self/fd"):
            if int(fd) > 2 and int(fd) not in keep:
                try:
                    os.close(int(fd))
                except OSError:
                    pass
        launcher = int(request.get("launcher") or launcher or parent)  # the build that asked
        env = session_environ(request["env"], imported_env, launcher)
        os.environ.clear()
        os.environ.update(env)
        os.chdir(request["cwd"])
        reseed(sys.modules)
        spec = importlib.util.find_spec(request["module"])
        sys.argv = [spec.origin if spec and spec.origin else request["module"], *request["args"]]
        from ipykernel.kernelapp import IPKernelApp

        # The parent_handle trait's default was read from the template's environment at import.
        IPKernelApp.launch_instance(argv=[*request["args"], f"--IPKernelApp.parent_handle={launcher}"])
        code = 0
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    except BaseException:  # noqa: BLE001 - report to the kernel's log, exit non-zero
        report(traceback.format_exc())
    finally:
        try:
            atexit._run_exitfuncs()
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def report(text: str) -> None:
    """Write ``text`` to the kernel's log: its fd 2, or, once ipykernel captures fd 2 (a pipe
    that a thread of its own copies to the log), straight to the log, for that thread may not
    run again before the kernel's ``os._exit`` (the text would be lost)."""
    fd = getattr(sys.stderr, "_original_stdstream_copy", None)
    try:
        os.write(fd if isinstance(fd, int) else 2, text.encode(errors="replace"))
    except OSError:
        pass


def streams(fds: list[int], null: int) -> tuple[int, int]:
    """A kernel's stdout and stderr: the two fds passed, the one passed for both, or ``null``."""
    if len(fds) == 1:
        return fds[0], fds[0]
    out, err = (fds + [null, null])[:2]
    return out, err


def imported_changes(before: Mapping[str, str | None], after: Mapping[str, str]) -> dict[str, list[Any]]:
    """What the template's imports set in the environment: name -> [as before, as after]."""
    return {k: [before.get(k), v] for k, v in after.items() if before.get(k) != v}


def session_environ(
    session_env: Mapping[str, str], imported_env: Mapping[str, list[Any]], parent: int
) -> dict[str, str]:
    """A kernel's environment: the session's own, plus what the template's imports set (where
    the session left a variable as the imports saw it: a fresh kernel's imports would set it)."""
    env = dict(session_env)
    for name, (seen, value) in imported_env.items():
        if env.get(name) == seen:
            env[name] = value
    env["JPY_PARENT_PID"] = str(parent)
    return env


def reseed(modules: Mapping[str, Any]) -> None:
    """Fresh seeds, from ``os.urandom``, for the generators the template imported (Python's,
    numpy's, torch's): no two sessions share a seed."""
    modules["random"].seed()
    if "numpy.random" in modules:
        modules["numpy.random"].seed(int.from_bytes(os.urandom(4), "little"))
    if "torch" in modules:  # seeds the (lazy) CUDA generators too, without touching CUDA
        modules["torch"].manual_seed(int.from_bytes(os.urandom(8), "little") >> 1)


if __name__ == "__main__":
    # A forked child comes back here and becomes a kernel (see BOOT).
    _become = main(sys.argv[3:])
    if _become is not None:
        child(*_become)

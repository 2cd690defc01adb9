"""Pre-initialised kernels: ipykernel's app and IPython's shell built once, in a fork server's
template (:mod:`.template`), before any fork; each forked kernel adopts them.

A forked kernel would otherwise spend most of its start-up in ``IPKernelApp.initialize``'s
first step (the command-line parser built from every configurable class, logging, the profile
directory, the config files) and in building its ``ZMQInteractiveShell`` (magics, formatters,
prefilters, completer, traceback handlers). Both are the same for every kernel of a template:
:func:`prepare` does them in the template, with the kernels' known extra arguments; a child
(:func:`start_kernel`) then only adds its connection file and parent to the configuration
(in place: the app, the shell and its parts share one config object, as in a fresh kernel),
builds its sockets, threads and kernel, and gives the shell what no two kernels share
(:func:`_adopt_shell`: its history, ``In``/``Out``/``_dh``, the environment the shell sets, its
starting directory, its kernel, its exit hook).

Anything else falls back to the full launch (``ipykernel_launcher``'s): a launch whose arguments
are not ``-f CONNECTION_FILE`` followed by the template's own, a session environment that
differs from the template's outside the variables no configuration reads, a config file
edited, added or removed since the template read them (a template may outlive a build), a
Python config file that does more than set values (:func:`only_settings`: it could read the
cwd or set the environment, which are the kernel's, not the template's), or a failure of
:func:`prepare` (another ipykernel or IPython, say; the template's log says why). A kernel that
asks for another shell (a configured subclass, other arguments) builds its own.

Like :mod:`.template`, it runs in the kernel's own Python, loaded by path: it imports only the
standard library at the top (ipykernel and IPython inside the functions).
"""

from __future__ import annotations

import ast
import atexit
import os
import sys
import tempfile
import traceback
from collections.abc import Mapping, Sequence
from typing import Any


def prepare(args: Sequence[str]) -> bool:
    """Configure ipykernel's ``IPKernelApp`` singleton as a fresh kernel's ``initialize`` would
    with ``args`` (the kernels' extra arguments, less ``-f FILE``), and build its shell; True if
    it could (else every child launches in full).

    It opens no socket, starts no thread and runs nothing in the shell. The crash handler the
    app installs is the kernels' (set again in each child): the template keeps its excepthook.
    """
    hook = sys.excepthook
    environ = dict(os.environ)
    try:
        from ipykernel.kernelapp import IPKernelApp
        from IPython.core.application import BaseIPythonApplication

        app = IPKernelApp.instance()
        code = _initialize_without_code(app, BaseIPythonApplication, list(args))
        if code:  # it could set the environment, read the cwd...: as each kernel's own launch
            raise RuntimeError(f"a config file runs code, read by each kernel: {', '.join(code)}")
        if app.subapp is not None or app.extra_args:  # not a kernel's configuration
            raise RuntimeError(f"unexpected kernel arguments: {list(args)}")
        # Cached by the stdlib on first use; ipykernel's compiler asks as it runs the first cell
        # (it creates and removes a file to find a writable directory).
        tempfile.gettempdir()
        _build_shell(app)
        app.livecells_config_files = config_files(app)  # not a trait: see start_kernel
        return True
    except BaseException:  # noqa: BLE001 - children launch in full; the template's log says why
        traceback.print_exc()
        forget()
        return False
    finally:
        sys.excepthook = hook
        os.environ.clear()  # what the shell set (TERM, PAGER...): each kernel sets its own
        os.environ.update(environ)


def _initialize_without_code(app: Any, base: Any, args: list[str]) -> list[str]:
    """``base.initialize(app, args)`` with its Python config files read only if they just set
    values (:func:`only_settings`); the files that do more (unread here) are returned."""
    from traitlets.config.loader import PyFileConfigLoader

    code: list[str] = []
    read = PyFileConfigLoader._read_file_as_dict

    def read_settings(loader: Any) -> None:
        with open(loader.full_filename, "rb") as file:
            source = file.read()
        if only_settings(source):
            read(loader)
        else:
            code.append(loader.full_filename)

    PyFileConfigLoader._read_file_as_dict = read_settings  # this process's class only
    try:
        base.initialize(app, args)
    finally:
        PyFileConfigLoader._read_file_as_dict = read
    return code


def config_files(app: Any) -> dict[str, tuple[int, int, int] | None]:
    """Every file ``app`` reads its configuration from, or would if it existed (``.py`` and
    ``.json``, in each of its config folders): its size, mtime and inode, or None."""
    bases = {"ipython_config", *(os.path.splitext(name)[0] for name in app.config_files if name)}
    found: dict[str, tuple[int, int, int] | None] = {}
    for folder in app.config_file_paths:
        for base in sorted(bases):
            for ext in (".py", ".json"):
                path = os.path.join(folder, base + ext)
                try:
                    st = os.stat(path)
                except OSError:
                    found[path] = None
                else:
                    found[path] = (st.st_size, st.st_mtime_ns, st.st_ino)
    return found


def _config_path(node: ast.expr) -> bool:
    """``c.Section.name`` (or deeper), as a config file writes a setting."""
    depth = 0
    while isinstance(node, ast.Attribute):
        node, depth = node.value, depth + 1
    return depth >= 2 and isinstance(node, ast.Name) and node.id == "c"


def _literal(node: ast.expr) -> bool:
    try:
        ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return True


def only_settings(source: bytes) -> bool:
    """Whether a Python config file only sets values: ``c = get_config()``, ``c.A.b = LITERAL``,
    ``c.A.b.append(LITERAL)`` (or ``extend``), docstrings. Such a file reads the same in the
    template as in each kernel; any other (an import, ``os.environ``, ``os.getcwd()``, a print,
    a syntax error) is read by each kernel at its own launch, as a fresh kernel reads it."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return False
    for node in tree.body:
        if isinstance(node, ast.Pass) or (
            isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
        ):
            continue
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
            if isinstance(target, ast.Name) and target.id == "c":
                if (isinstance(value, ast.Call) and isinstance(value.func, ast.Name)
                        and value.func.id == "get_config" and not value.args and not value.keywords):
                    continue
                return False
            if _config_path(target) and _literal(value):
                continue
            return False
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            call = node.value
            if (isinstance(call.func, ast.Attribute) and call.func.attr in ("append", "extend")
                    and _config_path(call.func.value) and len(call.args) == 1
                    and not call.keywords and _literal(call.args[0])):
                continue
        return False
    return True


def _build_shell(app: Any) -> None:
    """The kernels' ``ZMQInteractiveShell`` singleton, with an in-memory history of its own
    (no file, no saving thread; each child makes its own) and no exit hook (each child's)."""
    from ipykernel.ipkernel import IPythonKernel
    from ipykernel.zmqshell import ZMQInteractiveShell
    from IPython.core.history import HistoryManager
    from IPython.core.interactiveshell import InteractiveShell

    if IPythonKernel.class_traits()["shell_class"].default() is not ZMQInteractiveShell:
        raise RuntimeError("ipykernel's default shell is not ZMQInteractiveShell")

    def memory_history(self: Any) -> None:
        self.history_manager = HistoryManager(shell=self, parent=self, hist_file=":memory:")
        self.configurables.append(self.history_manager)

    # The section a child's command line creates before its shell exists (else the shell adds
    # a value to it, for tqdm's detection).
    app.config.IPKernelApp  # noqa: B018 - the lookup creates the section
    main = sys.modules.get("__main__")
    init_history = InteractiveShell.init_history
    InteractiveShell.init_history = memory_history  # this process's class only
    try:
        shell = ZMQInteractiveShell.instance(
            parent=app, profile_dir=app.profile_dir, user_module=None, user_ns=None, kernel=None,
            compiler_class=_compiler_class(IPythonKernel),
        )
    finally:
        InteractiveShell.init_history = init_history
        # The shell made its user module __main__: the template's back (the child's is the shell's).
        shell_main = sys.modules.get("__main__")
        if main is not None:
            sys.modules["__main__"] = main
    shell.livecells_user_main = shell_main  # not a trait
    atexit.unregister(shell.atexit_operations)  # registered again by the child that adopts it
    # Made on first use (a kernel's first output): a dozen configurables, built once here.
    shell.display_formatter.formatters  # noqa: B018


def _compiler_class(kernel_class: Any) -> Any:
    """The compiler class the kernel gives its shell: its ``compiler_class`` trait's default, or,
    in the ipykernels before that trait (6.20 to 6.2x), the XCachingCompiler that they pass."""
    traits = kernel_class.class_traits()
    if "compiler_class" in traits:
        return traits["compiler_class"].default()
    from ipykernel.compiler import XCachingCompiler

    return XCachingCompiler


def _unregister_history(history: Any) -> None:
    """Take ``history`` out of IPython's registry of history managers (IPython 9: it allows one
    per process, and its exit hook stops each one's thread). IPython 8 keeps no registry."""
    registry = getattr(type(history), "_instances", None)
    if registry is not None:
        registry.discard(history)


def forget() -> None:
    """Forget the template's app and shell (a child that launches in full, or a failed
    :func:`prepare`); never runs the shell's exit hook."""
    try:
        from ipykernel.kernelapp import IPKernelApp
        from ipykernel.zmqshell import ZMQInteractiveShell

        _drop_shell(ZMQInteractiveShell)
        IPKernelApp.clear_instance()
    except BaseException:  # noqa: BLE001 - nothing was made
        pass
    tempfile.tempdir = None


def _drop_shell(cls: Any) -> None:
    """Forget the template's shell, ``cls``'s instance, if any: no exit hook, no history."""
    shell = cls._instance
    if shell is not None:
        atexit.unregister(shell.atexit_operations)
        # Kept alive (gc.freeze): the kernel's history manager would not be the only one.
        _unregister_history(shell.history_manager)
    cls.clear_instance()


def connection_file(args: Sequence[str], preinitialised: Sequence[str]) -> str | None:
    """The connection file of a launch whose arguments are ``-f FILE`` (or ``-f=FILE``, ``--f``)
    followed by exactly ``preinitialised``; None for any other launch."""
    args = list(args)
    if args[:1] and args[0].startswith(("-f=", "--f=")):
        file, rest = args[0].split("=", 1)[1], args[1:]
    elif args[:1] in (["-f"], ["--f"]) and len(args) >= 2:
        file, rest = args[1], args[2:]
    else:
        return None
    return file if file and rest == list(preinitialised) else None


def same_environment(
    session: Mapping[str, str], template: Mapping[str, str], ignore: Sequence[str]
) -> bool:
    """Whether a session's environment is the template's, but for the names in ``ignore``."""
    skip = set(ignore)
    return all(
        session.get(k) == template.get(k) for k in set(session) | set(template) if k not in skip
    )


def start_kernel(request: Mapping[str, Any], parent: int, template: Mapping[str, Any] | None) -> None:
    """Run the kernel in a child: on the template's pre-initialised app and shell when
    ``template`` (``{"args": ..., "env": ...}``, None when :func:`prepare` failed) says the launch
    and environment are those it prepared for; otherwise as ``ipykernel_launcher`` would."""
    from ipykernel import kernelapp

    # The trait's default was read from the template's environment at import.
    watch = f"--IPKernelApp.parent_handle={parent}"
    argv = [*request["args"], watch]

    def full_launch() -> None:
        forget()
        kernelapp.launch_new_instance(argv=argv)

    app = kernelapp.IPKernelApp.instance() if kernelapp.IPKernelApp.initialized() else None
    file = None
    if template is not None and app is not None:
        file = connection_file(request["args"], template["args"])
        ignore = [*request.get("per_session_env", ()), *request.get("imported_env", ())]
        if file is not None and not same_environment(request["env"], template["env"], ignore):
            file = None
        # A template can outlive a build (a Dask worker's): config files edited, added or
        # removed since it read them are read by the kernel itself.
        if file is not None and config_files(app) != getattr(app, "livecells_config_files", None):
            file = None
    if file is None or app is None:
        full_launch()
        return
    from ipykernel.zmqshell import ZMQInteractiveShell
    from IPython.core.application import BaseIPythonApplication

    try:
        # What parsing ``-f FILE ... --IPKernelApp.parent_handle=PID`` adds to the template's
        # configuration (the rest of the arguments are the template's own), last, over the
        # config files'. In place: the template's shell and its parts share this config object,
        # as a fresh kernel's all share its app's.
        for config in (app.config, app.cli_config):
            config.IPKernelApp.connection_file = file
            config.IPKernelApp.parent_handle = parent
        app.connection_file, app.parent_handle, app.argv = file, parent, list(argv)
    except Exception:  # noqa: BLE001 - nothing is open yet: the full launch (the log says why)
        traceback.print_exc(file=sys.__stderr__)
        full_launch()
        return
    if ZMQInteractiveShell.initialized():  # the kernel asks for its shell: it gets the template's
        ZMQInteractiveShell.instance = classmethod(_adopt_shell)
    sys.excepthook = app.excepthook  # the crash handler, as in a fresh kernel
    app.livecells_preinitialised = True  # not a trait: for tests, which check the path taken
    # The rest of IPKernelApp.initialize (sockets, threads, kernel, shell) without its first
    # step, BaseIPythonApplication.initialize, done in the template. Only this process's class.
    base = BaseIPythonApplication.initialize
    BaseIPythonApplication.initialize = lambda self, argv=None: None
    try:
        app.initialize(argv)
    finally:
        BaseIPythonApplication.initialize = base
    app.start()


def _adopt_shell(cls: Any, *args: Any, **kwargs: Any) -> Any:
    """``ZMQInteractiveShell.instance`` for its first call in a child (the kernel's): the
    template's shell, made this kernel's. Any other call builds a shell from scratch."""
    from ipykernel.zmqshell import ZMQInteractiveShell

    del ZMQInteractiveShell.instance  # once: later calls are the singleton's own
    shell = ZMQInteractiveShell._instance
    parent = kwargs.get("parent")
    expected = (
        cls is ZMQInteractiveShell  # not a configured subclass
        and not args
        and parent is not None
        and kwargs.get("user_module") is None
        and kwargs.get("user_ns") is None
        and kwargs.get("profile_dir") is shell.profile_dir
        and kwargs.get("compiler_class") is shell.compiler_class
        and parent.config is shell.config  # the app's (see start_kernel)
    )
    if expected:
        try:
            shell.parent = parent
            shell.kernel = kwargs.get("kernel")
            shell.init_environment()  # TERM, PAGER...: into this kernel's own environment
            shell.starting_dir = os.getcwd()
            template_history = shell.history_manager
            shell.configurables.remove(template_history)
            _unregister_history(template_history)
            shell.init_history()  # this kernel's: its session (in memory or in a file), thread
            sys.modules["__main__"] = shell.livecells_user_main
            shell.init_user_ns()  # In, Out, _ih, _oh, _dh: into that history
            atexit.register(shell.atexit_operations)  # where a fresh shell registers it
            shell.livecells_template_shell = True  # not a trait: for tests (the path taken)
            return shell
        except Exception:  # noqa: BLE001 - a shell of its own (the kernel log says why)
            traceback.print_exc(file=sys.__stderr__)
    _drop_shell(ZMQInteractiveShell)
    return cls.instance(*args, **kwargs)

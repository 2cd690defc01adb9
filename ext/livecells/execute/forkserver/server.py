"""Fast kernel starts: kernels forked from a template process that imported the framework once.

A fresh kernel costs each session the interpreter's and ipykernel's start-up plus its
framework's import (``import torch`` alone takes seconds). A *template* process per (kernel
python, preload, kernelspec env) pays both once, then forks a kernel per launch request
(``docs/performance.rst`` has the figures). The fork happens
before the kernel app starts, never from a running kernel (an event loop cannot survive a fork;
ipykernel PR #410). A template whose imports touched CUDA refuses to serve: CUDA state does not
survive a fork, and each child must meet CUDA only after its ``CUDA_VISIBLE_DEVICES`` is set.

This module is the launcher's policy, :class:`ForkServer`: a template per key, which launch a
template may serve (the environment check, imported files changed since, the page's own copy of a
preload), replacements and the fallbacks said once; and jupyter_client's glue, whose kernels fork
from here: :class:`ForkServerProvisioner` replaces only the ``Popen`` of jupyter_client's
``LocalProvisioner`` by a request to the server (any failure launches normally), and
:class:`ForkedKernelManager` installs it without any kernelspec change. The rest of the
launcher's half is :mod:`.forked` (the template process, and a forked kernel as jupyter_client's
Popen); templates kept warm between builds are :mod:`.warm`. The template's program is
:mod:`livecells.kernel_side.template`, a file that the kernel's own Python runs.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import string
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from jupyter_client.connect import KernelConnectionInfo
from jupyter_client.manager import AsyncKernelManager
from jupyter_client.provisioning import LocalProvisioner

from livecells.errors import ForkServerError
from livecells.execute.environment import kernel_python
from livecells.execute.forkserver.forked import ForkedProcess, Template
from livecells.kernel_side.reaper import SESSION_VARIABLE, process_start
from livecells.model.environ import DEFAULT_ENV_DROP, kept_environ

if TYPE_CHECKING:
    from livecells.execute.forkserver.warm import KeepWarm
    from livecells.model.frameworks import FrameworkSpec

LAUNCHERS = ("ipykernel_launcher", "ipykernel")
#: Variables a session may set differently from its template: none is read at import time.
PER_SESSION_ENV = (
    "CUDA_VISIBLE_DEVICES",
    "JPY_PARENT_PID",
    "JPY_SESSION_NAME",
    "MPLBACKEND",
    "PAGER",
    "PYDEVD_DISABLE_FILE_VALIDATION",
    "PYTEST_CURRENT_TEST",
    SESSION_VARIABLE,
)
Key = tuple[str, tuple[str, ...], tuple[tuple[str, str], ...]]  # python, preload, kernelspec env
#: A template that dies or is stopped after it served (a cell killed its parent, say) is replaced
#: this many times per key; then that key's kernels start normally.
MAX_REPLACEMENTS = 3
logger = logging.getLogger(__name__)


class ForkServer:
    """Owns a build's templates: started lazily or by :meth:`prepare`, ended by :meth:`close`.

    A template imports with the build's environment plus the kernelspec's ``env``; a session
    whose environment differs elsewhere than in :data:`PER_SESSION_ENV` (and ``per_session_env``)
    is launched normally, since its preload might read those variables at import. With
    ``keep_warm`` (:mod:`.warm`), templates outlive the build and a later build adopts them.
    """

    def __init__(
        self,
        *,
        startup_timeout: float = 120.0,
        warn: Callable[[str], None] | None = None,
        note: Callable[[str], None] | None = None,
        enabled: bool | None = None,
        per_session_env: Sequence[str] = (),
        env_drop: Sequence[str] = DEFAULT_ENV_DROP,
        keep_warm: KeepWarm | None = None,
        tell: Callable[[str], None] | None = None,
        probe_cache: str | None = None,
    ) -> None:
        self.startup_timeout = startup_timeout
        self.keep_warm = keep_warm
        #: Folder where templates keep their preload probe's answer between builds (or None).
        self.probe_cache = probe_cache
        #: Says which template each key's kernels fork from: started, or adopted (kept warm).
        self.tell = tell or logger.debug
        #: Variables the templates (and so their kernels) never get: as a session's, see KernelSession.
        self.env_drop = tuple(env_drop)
        self.warn = warn or logging.getLogger(__name__).warning
        #: Says which preloads each kernel imports itself, and why (default: ``warn``).
        self.note = note or self.warn
        self.enabled = sys.platform.startswith("linux") if enabled is None else enabled
        self.per_session_env = frozenset(PER_SESSION_ENV) | frozenset(per_session_env)
        self.templates: dict[Key, Template] = {}
        #: Templates whose imported files changed: no more forks; closed once their kernels end.
        self.retired: list[Template] = []
        #: The first reason each key launched normally (said once through ``warn``).
        self.fallbacks: dict[Key, str] = {}
        self._broken: set[Key] = set()
        self.left_said: set[Key] = set()
        self._workdir: str | None = None
        #: Templates that died or were stopped after they served, and how many per key.
        self._abandoned: list[Template] = []
        self._replaced: dict[Key, int] = {}

    def prepare(self, framework: FrameworkSpec) -> None:
        """Start the framework's template if need be, and return: its imports overlap other work."""
        key = _key_of(framework)
        if key is not None:
            try:
                self._template(key)
            except ForkServerError as err:
                self._fallback(key, str(err), broken=True)

    async def ready(self, framework: FrameworkSpec) -> bool:
        """Start the framework's template if need be and wait until it can fork (False: never)."""
        key = _key_of(framework)
        if key is None:
            return False
        try:
            template = self._template(key)
            await template.wait_ready_async(self.startup_timeout)
        except ForkServerError as err:
            self._fallback(key, str(err), broken=True)
            return False
        self._say_left(key, template)
        return True

    def manager(self, framework: FrameworkSpec) -> AsyncKernelManager:
        """A manager for ``KernelSession(manager_factory=...)`` whose kernels fork from here."""
        return ForkedKernelManager(
            kernel_name=framework.kernel, fork_server=self, preload=framework.preload,
            framework_env=framework.kernel_env(os.environ),
        )

    def _template(self, key: Key) -> Template:
        if not self.enabled:
            raise ForkServerError(f"forking kernels needs Linux, not {sys.platform}")
        if key in self._broken:
            raise ForkServerError(self.fallbacks[key])
        template = self.templates.get(key)
        if template is not None and template._ready and (why := template.gone()):
            self._abandon(key, template, why)
            template = None
        if template is None:
            if self._workdir is None:  # mode 0700; AF_UNIX paths must stay short
                base = None if len(tempfile.gettempdir()) < 60 else "/tmp"
                self._workdir = tempfile.mkdtemp(prefix="livecells-fork-", dir=base)
            env = kept_environ(os.environ, (*self.env_drop, "PYTEST_CURRENT_TEST"))
            env.update({k: string.Template(v).safe_substitute(env) for k, v in key[2]})
            try:
                template = self._warm(key, env) if self.keep_warm is not None else None
                if template is None:
                    template = Template(key[0], key[1], self._workdir, env, probe_cache=self.probe_cache)
                    self.tell(f"a template imports {list(key[1])} for kernels of {key[0]}")
            except OSError as err:
                raise ForkServerError(f"cannot start the template: {err}") from err
            self.templates[key] = template
        return template

    def _warm(self, key: Key, env: dict[str, str]) -> Template | None:
        """The template kept warm for ``key`` (adopted, or started to be kept), or None while
        another build holds it (this build then starts one of its own)."""
        from livecells.execute.forkserver import warm

        assert self.keep_warm is not None
        slot = warm.Slot(self.keep_warm, key, env)
        if not slot.take():
            self.tell(f"the template kept warm for {list(key[1])} serves another build: this build starts its own")
            return None
        try:
            template, why = warm.adopt(slot, key, env)
            if template is not None:
                self.tell(f"kernels of {key[0]} fork from the template kept warm for {list(key[1])}")
            else:
                # One template kept per key: those kept for another environment stop (unless held).
                if warm.stop_all(self.keep_warm.folder, prefix=slot.prefix, but=slot.record):
                    why = why or "the environment changed"
                program = warm.program_state()
                settings = self.keep_warm.settings(slot.record)
                template = Template(
                    key[0], key[1], warm.socket_folder(), env, warm=settings, probe_cache=self.probe_cache
                )
                template.program, template.on_ready = program, _recorder(slot, self.warn)
                said = f" ({why})" if why else ""
                self.tell(f"a template imports {list(key[1])} for kernels of {key[0]}, kept warm{said}")
        except BaseException:
            slot.release()
            raise
        template.slot = slot
        return template

    def _abandon(self, key: Key, template: Template, why: str) -> None:
        """Put a template that served and then died or was stopped aside (its kernels live on
        with their sessions); the next launch starts another, up to :data:`MAX_REPLACEMENTS`."""
        del self.templates[key]
        self._abandoned.append(template)
        template.abandon()
        self._replaced[key] = self._replaced.get(key, 0) + 1
        if self._replaced[key] > MAX_REPLACEMENTS:
            raise ForkServerError(f"{why}, for the {self._replaced[key]}th time")
        logger.info("livecells: a fork-server template is replaced: %s", why)

    def _fallback(self, key: Key, reason: str, *, broken: bool) -> None:
        if broken:
            self._broken.add(key)
        if key not in self.fallbacks:
            self.fallbacks[key] = reason
            self.warn(f"kernels for {key[0]} {list(key[1])} start normally: {reason}")

    def _say_left(self, key: Key, template: Template) -> None:
        """Say once which preloads each kernel imports itself, and why."""
        if template.left and key not in self.left_said:
            self.left_said.add(key)
            for name, why in template.left.items():
                self.note(
                    f"preload {name!r} ({key[0]}) is imported by each kernel, not shared by forking: "
                    f"{why}; the modules it imports that do not are shared"
                )

    async def launch(
        self,
        cmd: Sequence[str],
        *,
        preload: Sequence[str],
        spec_env: Mapping[str, str],
        cwd: str,
        env: Mapping[str, str],
        stdout: Any = None,
        stderr: Any = None,
    ) -> ForkedProcess:
        """Fork a kernel for ``python -m ipykernel_launcher ...``, or raise ForkServerError."""
        if len(cmd) < 3 or cmd[1] != "-m" or cmd[2] not in LAUNCHERS:
            raise ForkServerError(f"not an ipykernel command: {list(cmd)}")  # by design: not said
        key = _key(cmd[0], spec_env, preload)
        fds = [fd for fd in (_stream_fd(stdout, 1), _stream_fd(stderr, 2)) if fd is not None]
        if len(fds) == 1:
            raise ForkServerError("stdout and stderr must both go to files or both to /dev/null")
        fds = fds[:1] if len(fds) == 2 and fds[0] == fds[1] else fds
        try:
            template = self._template(key)
            await template.wait_ready_async(self.startup_timeout)
            changed = template.changed_file()
            if changed is not None:
                # Its kernels would run the old code: a new template reads the files again.
                self._retire(key, template)
                template = self._template(key)
                await template.wait_ready_async(self.startup_timeout)
                changed = template.changed_file()
        except ForkServerError as err:
            self._fallback(key, str(err), broken=True)
            raise
        if changed is not None:
            why = f"{changed} changed as the template imported it"
            self._retire(key, template)
            self._fallback(key, why, broken=False)
            raise ForkServerError(why)
        self._say_left(key, template)
        differs = sorted(
            name
            for name in set(env) | set(template.env)
            if name not in self.per_session_env and env.get(name) != template.env.get(name)
        )
        if differs:
            why = f"the session's environment differs from the template's in {', '.join(differs)}"
            self._fallback(key, why, broken=False)
            raise ForkServerError(why)
        own = own_copy(template.preload, cwd, template.files)
        if own is not None:
            why = f"the page's folder has its own {own}, which a fresh kernel imports"
            self._fallback(key, why, broken=False)
            raise ForkServerError(why)
        payload = {
            "op": "launch", "module": cmd[2], "args": list(cmd[3:]), "cwd": cwd,
            # The build it must not outlive (a template kept warm outlives the one that started it).
            "launcher": os.getpid(), "launcher_start": process_start(os.getpid()),
        }
        try:
            reply = await asyncio.to_thread(template.request, dict(payload, env=dict(env)), fds)
        except ForkServerError as err:
            if not template.gone():  # else: this kernel starts normally, the next launch's
                self._fallback(key, str(err), broken=True)  # template is a new one
            raise
        if "pid" not in reply:  # this session only (a missing cwd, say)
            raise ForkServerError(reply.get("error", "no pid"))
        template.launched.append(reply["pid"])
        process = ForkedProcess(template, reply["pid"])
        template.starts[process.pid] = process._start
        return process

    def _retire(self, key: Key, template: Template) -> None:
        """Fork no more from ``template`` (its kernels live on); close the retired templates
        whose kernels have all ended."""
        if self.templates.get(key) is template:
            del self.templates[key]
            self.retired.append(template)
            template.let_go()  # no later build may adopt it; the next template may be kept
        for old in list(self.retired):
            if all(ForkedProcess(old, pid).poll() is not None for pid in old.launched):
                self.retired.remove(old)
                old.close()

    def close(self) -> None:
        """Kill every template and every kernel forked from one; safe to call twice."""
        kept_warm = [t for t in self.templates.values() if t._ready]  # the retired are not kept
        templates, self.templates = [*self.templates.values(), *self.retired, *self._abandoned], {}
        self.retired, self._abandoned = [], []
        for template in templates:
            if template.slot is not None and template in kept_warm and not template.gone():
                template.detach()
            else:
                template.close()
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None

    def __enter__(self) -> ForkServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def own_copy(preload: Sequence[str], cwd: str, imported: Mapping[str, Any]) -> str | None:
    """A preloaded package or module that the page's folder ``cwd`` has a copy of, other than
    the file the template imported (``imported``: its files outside the installed folders). A
    fresh kernel has its folder on ``sys.path`` before site-packages, so it imports that copy."""
    read = {os.path.realpath(path) for path in imported}
    for top in dict.fromkeys(name.split(".")[0] for name in preload):
        for path in (os.path.join(cwd, top, "__init__.py"), os.path.join(cwd, f"{top}.py")):
            if os.path.isfile(path):
                if os.path.realpath(path) not in read:
                    return path
                break
    return None


def _stream_fd(value: Any, default: int) -> int | None:
    """The fd a Popen ``stdout=``/``stderr=`` value stands for (None: /dev/null in the child)."""
    if value is None:
        return default  # Popen's None: inherit the launcher's stream
    if value == subprocess.DEVNULL:
        return None
    if isinstance(value, int) and value >= 0:
        return value
    if hasattr(value, "fileno"):
        return int(value.fileno())
    raise ForkServerError(f"cannot hand {value!r} to a forked kernel")


def _recorder(slot: Any, warn: Callable[[str], None]) -> Callable[[Template], None]:
    """Record a warm template for later builds once it is ready; if that fails, it ends with
    this build (as a template that is not kept warm)."""

    def record(template: Template) -> None:
        try:
            slot.write(template)
        except OSError as err:
            warn(f"a template cannot be kept warm: {err}")
            slot.release()
            template.slot = None

    return record


def _key_of(framework: FrameworkSpec) -> Key | None:
    from jupyter_client.kernelspec import KernelSpecManager

    try:
        spec = KernelSpecManager().get_kernel_spec(framework.kernel)
    except Exception:  # no such kernel: the session itself will say so
        return None
    return _key(spec.argv[0], {**framework.kernel_env(os.environ), **spec.env}, framework.preload)


def _key(python: str, spec_env: Mapping[str, str], preload: Sequence[str]) -> Key:
    """What a template is for: its python (as jupyter_client runs it), the environment a
    kernel gets beyond the build's (the framework's ``env``, then the kernelspec's), preload."""
    return (kernel_python(python), tuple(preload), tuple(sorted(spec_env.items())))


class ForkServerProvisioner(LocalProvisioner):  # type: ignore[misc]
    """LocalProvisioner whose launch asks the fork server; any failure launches normally."""

    fork_server: ForkServer | None = None
    preload: tuple[str, ...] = ()
    framework_env: dict[str, str] = {}  # replaced per kernel, never changed in place

    async def launch_kernel(self, cmd: list[str], **kwargs: Any) -> KernelConnectionInfo:
        if self.fork_server is None:
            return await super().launch_kernel(cmd, **kwargs)
        cwd = str(kwargs.get("cwd") or os.getcwd())
        try:
            process = await self.fork_server.launch(
                cmd,
                preload=self.preload,
                spec_env={**self.framework_env, **(self.kernel_spec.env if self.kernel_spec else {})},
                cwd=cwd,
                env=kwargs.get("env") or dict(os.environ),
                stdout=kwargs.get("stdout"),
                stderr=kwargs.get("stderr"),
            )
        except ForkServerError as err:
            self.log.debug("launching the kernel normally: %s", err)
            return await super().launch_kernel(cmd, **kwargs)
        # Popen-like: LocalProvisioner's poll/wait/signal/kill/terminate work on it unchanged.
        self.process = process  # type: ignore[assignment]
        # setsid() made it a session and process group leader: signals go to the whole group.
        self.pid = self.pgid = process.pid
        self.cwd = cwd
        return self.connection_info


class ForkedKernelManager(AsyncKernelManager):
    """An AsyncKernelManager whose kernels come from a :class:`ForkServer`."""

    def __init__(
        self,
        *,
        fork_server: ForkServer,
        preload: Sequence[str] = (),
        framework_env: Mapping[str, str] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.fork_server = fork_server
        self.preload = tuple(preload)
        self.framework_env = dict(framework_env or {})

    async def _async_pre_start_kernel(self, **kw: Any) -> tuple[list[str], dict[str, Any]]:
        metadata = self.kernel_spec.metadata if self.kernel_spec else {}
        own = metadata.get("kernel_provisioner", {}).get("provisioner_name")
        if self.provisioner is None and own in {None, "local-provisioner"}:
            # Kept on restarts; a kernelspec that names a provisioner of its own keeps it.
            self.kernel_id = self.kernel_id or kw.pop("kernel_id", str(uuid.uuid4()))
            provisioner = ForkServerProvisioner(
                kernel_id=self.kernel_id, kernel_spec=self.kernel_spec, parent=self
            )
            provisioner.fork_server = self.fork_server
            provisioner.preload = self.preload
            provisioner.framework_env = self.framework_env
            self.provisioner = provisioner
        return await super()._async_pre_start_kernel(**kw)

"""Execute stage, one session: a real Jupyter kernel that runs one page's cells for one framework.

:class:`KernelSession` starts a kernel (jupyter_client + the framework's kernelspec) in the page's
folder with its devices leased through ``CUDA_VISIBLE_DEVICES``, installs the hook of
:mod:`livecells.kernel_side.hook` (sent with the launch, see :mod:`livecells.execute.kernels.hook_call`) that
times each cell with ``perf_counter`` after the framework's queued device work has finished and
preloads the framework, runs cells and returns each one as a
:class:`~livecells.model.records.CellRecord` of plain data (Jupyter mime bundles). It knows
nothing of Sphinx. It is one kernel's life: the start (the hook's reply as the sign of life,
IOPub's readiness), a cell until idle, a timeout (interrupt, then stop), a death (why, in words),
and a shutdown that kills every process the kernel started.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import zmq
from jupyter_client.manager import AsyncKernelManager
from jupyter_core.paths import jupyter_runtime_dir

from livecells.errors import KernelDiedError
from livecells.execute.kernels.hook_call import PROBE_EXPRESSION, TIME_EXPRESSION, hook_request, measured, probe_value
from livecells.execute.kernels.iopub import OutputCollector, SessionDisplays
from livecells.execute.kernels.processes import dead, death_reason, kill_session
from livecells.kernel_side.reaper import SESSION_VARIABLE, Guard, process_start, reap
from livecells.model.environ import DEFAULT_ENV_DROP, kept_environ
from livecells.model.frameworks import FrameworkSpec
from livecells.model.records import CellRecord, Probe
from livecells.model.vocabulary import CellStatus

#: Given to every kernel livecells starts. Its input history lives in memory, for this session
#: only: a build never reads or writes the author's IPython history (``~/.ipython``), whose
#: SQLite file concurrent kernels would also contend for (a commit after every cell, on a thread
#: of its own); ``%history`` and ``In`` still show the session's cells.
KERNEL_ARGUMENTS = ("--HistoryManager.hist_file=:memory:",)


def _msg_id(sent: str | asyncio.Future) -> str:
    """The msg_id of a request just sent. jupyter_client 8.0's async client hands it back inside a
    finished Future (8.1 and later: plainly); compared with replies' parent ids as it is, a Future
    never matches, and every start waited out its whole timeout."""
    return sent.result() if isinstance(sent, asyncio.Future) else sent


class KernelSession:
    """One running kernel for one (page, framework) session. Use as an async context manager."""

    #: Seconds a kernel is given to end a timed-out cell after its interrupt before it is stopped.
    interrupt_grace: float = 10.0

    def __init__(
        self,
        framework: FrameworkSpec,
        *,
        cwd: str | os.PathLike[str],
        devices: Sequence[int] | None = None,
        log_path: str | os.PathLike[str] | None = None,
        output_limit: int = 100_000,
        startup_timeout: float = 120.0,
        extra_env: Mapping[str, str] | None = None,
        manager_factory: Callable[[FrameworkSpec], AsyncKernelManager] | None = None,
        guard: Guard | None = None,
        env_drop: Sequence[str] = DEFAULT_ENV_DROP,
    ) -> None:
        self.framework = framework
        self.cwd = str(cwd)
        self.devices = list(devices or [])
        self.log_path = log_path
        self.output_limit = output_limit
        self.startup_timeout = startup_timeout
        self.extra_env = dict(extra_env or {})
        #: Patterns of the build's variables that the kernel does not get (livecells_env_drop).
        self.env_drop = tuple(env_drop)
        #: Makes the kernel manager (e.g. ``ForkServer.manager``); default: a plain AsyncKernelManager.
        self.manager_factory = manager_factory
        #: Kills the kernel's process tree if the build dies before :meth:`shutdown` runs.
        self.guard = guard
        #: Marks the session's processes (``LIVECELLS_SESSION``), to find its orphans.
        self.token = uuid.uuid4().hex
        self.pid: int | None = None
        self._pid_start: int | None = None
        self._killed: list[int] = []
        self._root_killed = False
        self._ipc_prefix = ""
        self.km: AsyncKernelManager | None = None
        self.kc: Any = None
        self._log: Any = None
        #: Why the kernel can run no more cells (it died, or was stopped after a timeout).
        self.broken: str | None = None
        #: The kernelspec's name, display name and language (for notebooks), once started.
        self.kernelspec: dict[str, str] = {}
        #: Display ids across the session's cells: a later cell's update changes an earlier one.
        self.displays = SessionDisplays()
        self._probed: Probe | None = None

    async def __aenter__(self) -> KernelSession:
        try:
            await self.start()
        except BaseException:
            await self.shutdown()
            raise
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.shutdown()

    def _environment(self) -> dict[str, str]:
        env = kept_environ(os.environ, self.env_drop)
        env.update(self.framework.kernel_env(os.environ))  # the framework's, where unset
        env.update(self.extra_env)
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(d) for d in self.devices)
        env[SESSION_VARIABLE] = self.token
        # ipykernel stops capturing fds 1 and 2 when it thinks it runs under pytest; a kernel
        # started by a test must behave as in a real build.
        env.pop("PYTEST_CURRENT_TEST", None)
        env.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
        # The kernel's own colours are stripped later; no pager or terminal tricks.
        env["PAGER"] = "cat"
        return env

    async def start(self) -> None:
        if self.manager_factory is not None:
            self.km = self.manager_factory(self.framework)
        else:
            self.km = AsyncKernelManager(kernel_name=self.framework.kernel)
        # IPC sockets: reachable only from this machine, signed with the connection key.
        self.km.transport = "ipc"
        runtime = Path(jupyter_runtime_dir())
        runtime.mkdir(parents=True, exist_ok=True)
        self.km.ip = str(runtime / f"livecells-{uuid.uuid4().hex[:12]}")
        self._ipc_prefix = self.km.ip
        if self.log_path:
            Path(self.log_path).parent.mkdir(parents=True, exist_ok=True)
            self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in shutdown()
        output = self._log if self._log is not None else asyncio.subprocess.DEVNULL
        # The kernelspec first: for the native kernel jupyter_client imports ipykernel, which
        # (6.x) imports debugpy, which sets PYDEVD_USE_FRAME_EVAL in this process. Read after
        # it, the session's environment is the one a fork server's template starts with.
        self.km.kernel_spec  # loaded on first access
        await self.km.start_kernel(
            cwd=self.cwd,
            env=self._environment(),
            stdout=output,
            stderr=output,
            extra_arguments=list(KERNEL_ARGUMENTS),
        )
        self.pid = getattr(self.km.provisioner, "pid", None)
        # Which process the pid is: a forked kernel that dies is reaped by its template at once,
        # and its pid may then name another process by the time this session ends.
        self._pid_start = process_start(self.pid) if self.pid else None
        if self.guard is not None and self.pid:
            self.guard.watch(self.pid, self.token)
        spec = self.km.kernel_spec
        if spec is not None:
            self.kernelspec = {
                "name": self.framework.kernel,
                "display_name": spec.display_name,
                "language": spec.language or "python",
            }
        self.kc = self.km.client()
        # The client's sockets come from its own context (not the manager's): options go there.
        # A client that connects before the kernel listens retries every RECONNECT_IVL (ZMQ's
        # default, 100 ms, is most of a forked kernel's start-up).
        self.kc.context.setsockopt(zmq.RECONNECT_IVL, 10)
        # No receive limit: ZMQ would drop IOPub messages (output) while the client is busy.
        self.kc.context.setsockopt(zmq.RCVHWM, 0)
        # Shell and IOPub only: no stdin (cells run with allow_stdin=False), no heartbeat (the
        # process itself says whether the kernel lives), no control (the manager has its own).
        self.kc.start_channels(stdin=False, hb=False, control=False)
        # The hook is sent at once: the shell socket queues it until the kernel listens, and
        # its reply says that the kernel is up, with no polling (each poll is a request the
        # kernel answers once it is up). It is a user expression of an empty silent cell, not
        # the cell's code: the kernel then neither transforms nor hashes its ~10 kB of source
        # (~12 ms of each start, measured). Its own IOPub status messages then prove IOPub.
        request = hook_request(self.framework, self.output_limit)
        hook_id = self._send("", silent=True, user_expressions={"hook": request})
        started = time.monotonic()
        reply = await self._shell_reply(hook_id, self.startup_timeout)
        content = reply["content"]
        if content["status"] == "ok":
            content = content.get("user_expressions", {}).get("hook", {"status": "no reply"})
        if content["status"] != "ok":
            raise RuntimeError(
                f"could not prepare the kernel: {content.get('ename')}: {content.get('evalue')}"
            )
        await self._wait_ready(self.startup_timeout - (time.monotonic() - started), hook_id)

    async def _wait_ready(self, timeout: float, hook_id: str = "") -> None:
        """Wait until the kernel answers on shell and IOPub.

        IOPub output for a request of ours proves both channels work, at once; jupyter_client's
        ``wait_for_ready`` then also waits 0.2 s for IOPub to fall quiet. The hook's own status
        messages (``hook_id``, already answered on shell) most often do, with no request more;
        else (IOPub subscribed too late for them) kernel_info requests until one shows.
        """
        assert self.kc is not None and self.km is not None
        deadline = time.monotonic() + timeout
        # Published just before and after the hook's reply (IOPub's thread may lag it a little).
        if hook_id and await self._iopub_shows(hook_id, min(deadline, time.monotonic() + 0.02)):
            return
        interval = 0.02  # IOPub drops what the kernel publishes before it has subscribed: ask again
        while True:
            msg_id = _msg_id(self.kc.kernel_info())
            retry_at = min(deadline, time.monotonic() + interval)
            interval = min(interval * 1.5, 0.5)
            if await self._iopub_shows(msg_id, retry_at):
                return
            if not await self.km.is_alive():
                raise RuntimeError(f"the kernel died while starting ({self._death_reason()})")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the kernel did not answer within {timeout:g} s")

    async def _iopub_shows(self, msg_id: str, until: float) -> bool:
        """Whether an IOPub message for ``msg_id`` arrives before ``until`` (monotonic)."""
        assert self.kc is not None
        while (left := until - time.monotonic()) > 0:
            try:
                msg = await self.kc.get_iopub_msg(timeout=left)
            except Exception:  # queue.Empty: none came
                return False
            if msg["parent_header"].get("msg_id") == msg_id:
                return True
        return False

    async def _shell_reply(self, msg_id: str, timeout: float) -> dict[str, Any]:
        """The shell reply to ``msg_id`` (its IOPub messages are not read)."""
        assert self.kc is not None and self.km is not None
        deadline = time.monotonic() + timeout
        while True:
            wait = min(0.5, deadline - time.monotonic())
            if wait <= 0:
                raise RuntimeError(f"the kernel did not answer within {timeout:g} s")
            try:
                msg = await self.kc.get_shell_msg(timeout=wait)
            except Exception:  # queue.Empty: check that the kernel is still alive
                if not await self.km.is_alive():
                    raise RuntimeError(f"the kernel died while starting ({self._death_reason()})") from None
                continue
            if msg["parent_header"].get("msg_id") == msg_id:
                return msg

    async def _request(
        self,
        code: str,
        *,
        silent: bool = False,
        timeout: float | None = None,
        user_expressions: Mapping[str, str] | None = None,
        collector: OutputCollector | None = None,
    ) -> dict[str, Any]:
        """Send one execute request; gather its iopub output until idle; return the reply."""
        msg_id = self._send(code, silent=silent, user_expressions=user_expressions)
        return await self._wait(msg_id, timeout, collector)

    def _send(
        self, code: str, *, silent: bool = False, user_expressions: Mapping[str, str] | None = None
    ) -> str:
        assert self.kc is not None
        return _msg_id(
            self.kc.execute(
                code,
                silent=silent,
                store_history=not silent,
                user_expressions=dict(user_expressions or {}),
                allow_stdin=False,
                # Every cell runs whatever the one before did (as nbclient asks when errors are
                # allowed): ipykernel would abort requests that reach it just after an error.
                stop_on_error=False,
            )
        )

    async def _wait(
        self, msg_id: str, timeout: float | None, collector: OutputCollector | None = None
    ) -> dict[str, Any]:
        """The reply to ``msg_id``, after its output has gone idle; TimeoutError past ``timeout``."""
        assert self.kc is not None and self.km is not None
        deadline = None if timeout is None else time.monotonic() + timeout
        idle = False
        reply: dict[str, Any] | None = None
        while not (idle and reply is not None):
            wait = 0.5 if deadline is None else min(0.5, deadline - time.monotonic())
            if wait <= 0:
                raise asyncio.TimeoutError
            try:
                if not idle:
                    msg = await self.kc.get_iopub_msg(timeout=wait)
                else:
                    msg = await self.kc.get_shell_msg(timeout=wait)
            except Exception:  # queue.Empty: check that the kernel is still alive
                if not await self.km.is_alive():
                    raise KernelDiedError(self._death_reason()) from None
                continue
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            if idle:
                reply = msg
                continue
            msg_type = msg["header"]["msg_type"]
            if msg_type == "status":
                idle = msg["content"]["execution_state"] == "idle"
            elif collector is not None:
                collector.handle(msg_type, msg["content"])
        return reply

    def _death_reason(self) -> str:
        return death_reason(getattr(getattr(self.km, "provisioner", None), "process", None))

    async def run_cell(self, code: str, timeout: float, *, last: bool = False) -> CellRecord:
        """Run one cell; errors, timeouts and a dying kernel become the cell's result.

        ``last``: no cell follows, so the session's :meth:`probe` comes with this cell's reply
        (evaluated after the cell and its timing hook), one round trip less.
        """
        collector = OutputCollector(self.output_limit, self.displays)
        expressions = {"time": TIME_EXPRESSION}
        if last:
            expressions["probe"] = PROBE_EXPRESSION
        msg_id = self._send(code, user_expressions=expressions)
        try:
            reply = await self._wait(msg_id, timeout, collector)
        except asyncio.TimeoutError:
            await self._interrupt(msg_id, collector)
            interrupted = collector.error or {}
            return CellRecord(
                status=CellStatus.TIMEOUT,
                outputs=collector.outputs,
                error={
                    "ename": "CellTimeoutError",
                    "evalue": f"the cell did not finish within {timeout:g} s",
                    # Where the interrupt stopped it, when the kernel could say.
                    "traceback": interrupted.get("traceback", []),
                },
            )
        except KernelDiedError as died:
            self.broken = str(died)
            return CellRecord(
                status=CellStatus.DIED,
                outputs=collector.outputs,
                error={"ename": "DeadKernelError", "evalue": str(died), "traceback": []},
            )
        content = reply["content"]
        values = content.get("user_expressions", {})
        if not values.get("time"):
            # ipykernel skips user_expressions after an error; ask for them separately.
            followup = await self._request("pass", silent=True, timeout=30, user_expressions=expressions)
            values = followup["content"].get("user_expressions", {})
        if last:
            self._probed = probe_value(values.get("probe", {}))
        elapsed = measured(values.get("time", {}), content.get("execution_count"))
        status = CellStatus.OK if content.get("status") == "ok" else CellStatus.ERROR
        error = collector.error
        if status == CellStatus.ERROR and error is None:
            error = {
                "ename": content.get("ename", "Error"),
                "evalue": content.get("evalue", ""),
                "traceback": list(content.get("traceback", [])),
            }
        return CellRecord(
            status=status,
            outputs=collector.outputs,
            time=elapsed,
            execution_count=content.get("execution_count"),
            error=error,
        )

    async def _interrupt(self, msg_id: str, collector: OutputCollector) -> None:
        """Interrupt a cell that ran out of time and wait for it to end (its traceback says where).

        A kernel that ignores the interrupt (a long C call, a handler of its own) is stopped;
        :attr:`broken` then says why no later cell of the session can run.
        """
        assert self.km is not None
        try:
            await self.km.interrupt_kernel()
            await self._wait(msg_id, self.interrupt_grace, collector)
        except (asyncio.TimeoutError, KernelDiedError):
            self.broken = "the kernel ignored the interrupt after a timeout and was stopped"
            self._kill_processes()
            await self.km.shutdown_kernel(now=True)

    async def probe(self) -> Probe:
        """The session's provenance as the kernel sees it (versions, host, whether a GPU was used);
        read with the last cell when it ran with ``last=True``."""
        if self._probed is not None:
            return self._probed
        reply = await self._request(
            "pass", silent=True, timeout=30, user_expressions={"probe": PROBE_EXPRESSION}
        )
        return probe_value(reply["content"].get("user_expressions", {}).get("probe", {}))

    def _kill_processes(self) -> None:
        """Kill the kernel and every process it started (:func:`.kernel_processes.kill_session`)."""
        pid, self.pid = self.pid, None
        self._killed, self._root_killed = kill_session(pid, self._pid_start, self.token, self.guard)

    async def shutdown(self) -> None:
        """Stop the kernel and every process it started; safe to call twice."""
        km, kc, self.km, self.kc = self.km, self.kc, None, None
        try:
            if kc is not None:
                kc.stop_channels()
            pid = self.pid
            self._kill_processes()
            if pid and self._root_killed:
                # Until it is dead (a zombie, seen in /proc), so that its teardown never runs
                # beside the next session's cells.
                await dead(pid, 5.0)
            if km is not None and km.has_kernel:
                process = getattr(km.provisioner, "process", None)
                if self._root_killed and hasattr(process, "killed"):
                    process.killed()  # its status is known: the template need not be asked
                await km.shutdown_kernel(now=True)  # collects it, removes its files and sockets
            # The killed processes whose parents died with the kernel are now our children
            # when this process is a subreaper: collect them (no zombies).
            reap(self._killed)
            if self._ipc_prefix:  # the IOPub pipe's socket (the hook moved it there); jupyter_client
                with contextlib.suppress(OSError):  # removes the others
                    os.unlink(f"{self._ipc_prefix}-pipe")
                self._ipc_prefix = ""
        finally:
            if self._log is not None:
                self._log.close()
                self._log = None

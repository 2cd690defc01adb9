"""jupyter_client's side of the fork server: a provisioner and a manager whose kernels are forked.

jupyter_client stays in charge of everything but the process's start: :class:`ForkServerProvisioner`
only replaces the ``Popen`` of :class:`~jupyter_client.provisioning.LocalProvisioner` by a request
to the build's :class:`~livecells.execute.forkserver.ForkServer` and hands back a Popen-like
:class:`~livecells.execute.forked.ForkedProcess`; :class:`ForkedKernelManager` installs it without
any kernelspec change. Any failure falls back to the normal launch.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from jupyter_client.connect import KernelConnectionInfo
from jupyter_client.manager import AsyncKernelManager
from jupyter_client.provisioning import LocalProvisioner

from livecells.execute.forked import ForkServerError

if TYPE_CHECKING:
    from livecells.execute.forkserver import ForkServer


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

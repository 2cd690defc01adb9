"""What runs: one session's plan, its stored record, the execution mode and the devices decide.

:func:`decide` is the whole policy, as a pure function (no Sphinx, no kernels, no files):

- ``livecells_execute = 'off'`` or ``'cache'`` runs nothing: the stored (or recorded) results stand;
- ``livecells_device = 'gpu'`` on a machine without a GPU runs nothing;
- a page that needs more GPUs (``live-settings :gpus:``) than one session can lease is not run,
  with a warning;
- a framework whose kernel cannot be used here (no such kernelspec, say) is not run: an error,
  for CI, and a warning at the page's first cell;
- in ``'auto'`` mode a stored record made for the same key stands, unless the environment
  changed or the device kind did (CPU result, GPU now); a GPU result is never replaced by a
  CPU run while the code is the same;
- everything else runs, leasing one GPU (or the page's ``:gpus:``) when there are any.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from livecells.model.plans import SessionPlan
from livecells.model.records import SessionRecord
from livecells.model.vocabulary import DeviceMode, ExecuteMode, WarningMessage, WarningSubtype


@dataclass(frozen=True)
class Mode:
    """The build's execution settings (``livecells_execute``, ``livecells_device``) and the GPUs
    one session can lease (this machine's, or one cluster worker's)."""

    execute: ExecuteMode = ExecuteMode.AUTO
    device: DeviceMode = DeviceMode.AUTO
    gpu_slots: int = 0


@dataclass(frozen=True)
class Environment:
    """The fingerprint of the framework's kernel environment: its digest, or why it cannot run."""

    digest: str = ""
    problem: str = ""


@dataclass(frozen=True)
class Decision:
    """Run the session (leasing ``gpus``), or not and why."""

    run: bool
    gpus: int = 0
    environment: str = ""  # the fingerprint's digest, for the record
    reason: str = ""  # why it does not run
    #: It cannot run here (its framework's kernel is unusable): an error for CI.
    failed: bool = False
    #: Warnings to give at the session's first cell.
    warnings: tuple[WarningMessage, ...] = ()


def decide(
    session: SessionPlan,
    key: str,
    stored: SessionRecord | None,
    mode: Mode,
    environment: Callable[[], Environment],
) -> Decision:
    """Whether ``session`` (whose key is now ``key``) runs in this build.

    ``environment`` is called only when the answer depends on it (it may start a process to ask
    the kernel's Python for its versions).
    """
    if mode.execute == ExecuteMode.OFF:
        return Decision(False, reason="execution is off (livecells_execute = 'off')")
    if mode.execute == ExecuteMode.CACHE:
        return Decision(False, reason="livecells_execute = 'cache' runs nothing")
    if mode.device == DeviceMode.GPU and not mode.gpu_slots:
        return Decision(False, reason="no GPU on this machine (livecells_device = 'gpu')")
    needed = session.settings.gpus
    if needed and needed > mode.gpu_slots:
        warning = (
            f"{session.name}: the page needs {needed} GPU(s) (live-settings :gpus:) but "
            f"{mode.gpu_slots} are available; the page is not run"
        )
        return Decision(
            False,
            reason=f"the page needs {needed} GPU(s); {mode.gpu_slots} are available",
            warnings=(WarningMessage(WarningSubtype.DEVICE, warning),),
        )
    gpus = (1 if needed is None else needed) if mode.gpu_slots else 0
    env = environment()
    if env.problem:
        return Decision(
            False,
            reason=env.problem,
            failed=True,
            warnings=(WarningMessage(WarningSubtype.KERNEL, f"{session.name}: not run: {env.problem}"),),
        )
    if mode.execute == ExecuteMode.AUTO and stored is not None and stored.key == key:
        leased_before = stored.provenance.devices_leased
        if stored.environment == env.digest and bool(leased_before) == bool(gpus):
            return Decision(False, environment=env.digest)
        if leased_before and not gpus:
            # Never replace a GPU result by a CPU run when the code did not change.
            return Decision(False, environment=env.digest)
    return Decision(True, gpus=gpus, environment=env.digest)

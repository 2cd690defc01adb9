"""Every exception livecells raises, in one module, under one base (:class:`LivecellsError`).

Each keeps the builtin base it had (a ``ValueError`` for a value that cannot be used, a
``RuntimeError`` for a process or service that failed), so ``except ValueError`` still catches
it. None of them reaches the author as a traceback: each stage turns its own into a located
warning, a failed session, or a command's exit status. A leaf: it imports nothing.
"""

from __future__ import annotations

from typing import Any


class LivecellsError(Exception):
    """The base of livecells' own exceptions."""


# -- config and authoring ------------------------------------------------------------------------


class ConfigError(LivecellsError, ValueError):
    """A config value that cannot be used; the message names the value."""


class EntriesDroppedError(ConfigError):
    """Some entries of a list value cannot be used: each is reported and dropped, the rest kept."""

    def __init__(self, kept: Any, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.kept = kept
        self.problems = problems


class UnsafeMathError(LivecellsError, ValueError):
    """Math from a cell that holds TeX outside the allowlist (:mod:`livecells.render.safe_tex`)."""


# -- the store -----------------------------------------------------------------------------------


class StoreEntryError(LivecellsError, ValueError):
    """A record or output that does not have the stored shape; the message says where and why."""


class StoreError(LivecellsError):
    """A store file that cannot be used; the message says which and why."""


# -- execution -----------------------------------------------------------------------------------


class ExecutorError(LivecellsError, RuntimeError):
    """The executor cannot be used (unknown, unreachable, without workers); the message names
    ``livecells_executor``. The build turns it into Sphinx's errors."""


class KernelDiedError(LivecellsError, RuntimeError):
    """The kernel process ended while a cell ran."""


class DeviceError(LivecellsError, RuntimeError):
    """A worker cannot lend the GPUs a session asks for."""


class TaskCancelledError(LivecellsError):
    """A worker's task was cancelled while it waited for a template or for the worker's other
    sessions."""


class ForkServerError(LivecellsError, RuntimeError):
    """The template could not be started or talked to; the session falls back to a normal launch."""


# -- commands outside a build --------------------------------------------------------------------


class BookError(LivecellsError, RuntimeError):
    """The book's conf.py cannot be found or run, or its pages cannot be read."""


class UnreadableError(LivecellsError):
    """An input of ``convert`` that cannot be read: the run stops with status 2."""

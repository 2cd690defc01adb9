"""``livecells_executor = "echo://NAME"``: sessions run as ``local`` runs them (kernels on the
build's machine), and the executor says in the build's log that it was the one chosen."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from livecells.execute.executors import Capacity, LocalExecutor


@dataclass(frozen=True)
class EchoExecutor(LocalExecutor):
    def check(self, warm: Any) -> Capacity:
        return Capacity(description=f"the echo executor runs this build's sessions ({self.address})")

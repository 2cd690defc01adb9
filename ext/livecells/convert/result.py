"""What converting one chapter gives, whichever its format: :class:`Result`."""

from __future__ import annotations

from dataclasses import dataclass, field

from livecells.convert.gpus import GpuInference, where


@dataclass
class Result:
    """A converted chapter: its text, its live cells, ``source:line`` warnings, the devices.

    ``gpus`` is the ``:gpus:`` of the ``live-settings`` that the conversion wrote (None when it
    wrote none); ``settings_kept`` says the chapter had its own ``live-settings``, left as they
    are; ``gpu_inference`` is what the code asks for, and why; ``requires``: the pip arguments
    of its d2lbook ``# required_libs(...)``, which ``convert`` writes into ``livecells_hosted``.
    """

    text: str
    cells: int = 0
    warnings: list[str] = field(default_factory=list)
    gpus: int | None = None
    settings_kept: bool = False
    gpu_inference: GpuInference = field(default_factory=GpuInference)
    requires: list[str] = field(default_factory=list)

    def summary(self, source: str) -> str:
        """One line for the report: what was converted, then the settings inferred."""
        return self.converted(source) + self.devices()

    def converted(self, source: str) -> str:
        """The report's first part: what each format counts."""
        return f"{source}: {self.cells} live cells"

    def devices(self) -> str:
        """The report's last part: the ``live-settings`` written or kept, the indices not counted."""
        inference, text = self.gpu_inference, ""
        if self.gpus:
            text += f"; inferred live-settings :gpus: {self.gpus} from {where(inference.evidence)}"
        elif self.settings_kept:
            text += f"; its live-settings kept (the code asks for {inference.gpus} devices)"
        if inference.ignored:
            text += f"; not counted as devices: {where(inference.ignored)}"
        return text

"""Store stage: executed sessions kept per page as plain JSON, fit to commit (:mod:`.files`);
the shape a stored session must have, and the one place records become JSON (:mod:`.schema`)."""

from livecells.store.files import OutputStore, StoreProblem
from livecells.store.schema import Invalid, check_output, repaired, shown_output

__all__ = ["Invalid", "OutputStore", "StoreProblem", "check_output", "repaired", "shown_output"]

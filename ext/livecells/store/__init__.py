"""Store stage: executed sessions kept per page as plain JSON, fit to commit (:mod:`.files`);
the shape a stored session must have (:mod:`.schema`), and the one place records become JSON
(:mod:`.codec`)."""

from livecells.store.codec import repaired, session_from_json, session_to_json
from livecells.store.files import OutputStore, StoreProblem
from livecells.store.schema import Invalid, check_output, shown_output

__all__ = [
    "Invalid", "OutputStore", "StoreProblem", "check_output", "repaired", "session_from_json", "session_to_json",
    "shown_output",
]

"""Store stage: executed sessions kept per page as plain JSON, fit to commit (:mod:`.files`);
the shape a stored session must have (:mod:`.schema`), and the one place records become JSON
(:mod:`.codec`)."""

from livecells.store.codec import repaired, session_from_json, session_to_json
from livecells.store.files import OutputStore
from livecells.store.schema import check_output, shown_output

__all__ = ["OutputStore", "check_output", "repaired", "session_from_json", "session_to_json", "shown_output"]

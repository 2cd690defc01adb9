"""Plan stage: the keys of every session, and what runs (see :mod:`.decide`)."""

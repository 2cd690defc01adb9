"""``python -m livecells convert``: d2lbook chapters (RST or Markdown) into livecells pages.

:mod:`~livecells.convert.rst` and :mod:`~livecells.convert.markdown` (with its grammar's pieces in
:mod:`~livecells.convert.md_blocks`) read one chapter each, :mod:`~livecells.convert.gpus` infers
the ``live-settings`` a chapter's devices ask for, :mod:`~livecells.convert.result` is what a
conversion gives, and :mod:`~livecells.convert.tree` chooses the reader, walks a tree and drives
the command. Nothing here needs Sphinx.
"""

"""``python -m livecells convert``: d2lbook chapters (RST or Markdown) into livecells pages.

:mod:`~livecells.convert.rst` and :mod:`~livecells.convert.markdown` read one chapter each (and
walk a tree), :mod:`~livecells.convert.gpus` infers the ``live-settings`` a chapter's devices ask
for. Nothing here needs Sphinx.
"""

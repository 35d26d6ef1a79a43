"""The docs pages generated from the tools' own output, never edited by hand.

``python -m app.docgen cli`` writes the CLI reference from the parser; ``bench`` and ``accuracy``
write the benchmark and accuracy pages from the JSON of ``headroom bench --format json`` and
``python -m app.bench.accuracy --format json``, each with the commit, machine and date the JSON
records. ``tests/docs/test_docs.py`` regenerates every page from its committed input and compares.
"""

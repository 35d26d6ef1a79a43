"""The decision: prices and costs (:mod:`~.money`), the scenarios document (:mod:`~.decision`) and its
Markdown and CSV (:mod:`~.scenarios_text`), policy rows (:mod:`~.policies`, :mod:`~.policy_file`), one
scenario run for the CLI and the dashboard (:mod:`~.inputs`), saved scenario sets (:mod:`~.saved`)."""

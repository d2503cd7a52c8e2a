"""The rulebook: rule files (``rules/*.yaml``) loaded, validated and compiled once.

Public surface::

    from dradiag.rulebook import load_rulebook, Rulebook, Rule

``load_rulebook()`` is cached per process. Matching evidence against rules is an
analysis and lives in ``dradiag.analyses.rule_matching``; docs and the ``rules``
command's views are drawn by ``dradiag.rulebook.docs``.
"""

from __future__ import annotations

from dradiag.rulebook.loader import Rulebook, load_rulebook, load_rulebook_from
from dradiag.rulebook.schema import DOC_HEADINGS, Rule, RuleFileError

__all__ = [
    "DOC_HEADINGS",
    "Rule",
    "RuleFileError",
    "Rulebook",
    "load_rulebook",
    "load_rulebook_from",
]

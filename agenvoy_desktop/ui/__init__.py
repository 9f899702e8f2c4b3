"""PySide6 views: the only package allowed to import Qt.

Importing the package first shields the interpreter from a reference-count
bug in PySide6 6.12 on CPython 3.11 (see :func:`pin_singletons`).
"""

from __future__ import annotations

import ctypes
import sys

PINNED_REFS = 1 << 40
"""References added to ``None``/``True``/``False``: more than any run can ever drop."""


def pin_singletons() -> bool:
    """Make ``None``, ``True`` and ``False`` impossible to free, as CPython 3.12+ does.

    PySide6 6.12 returns ``None`` from every void method and ``True`` from
    every ``Signal.emit`` without taking a reference, so each call drops one
    reference it never owned.  CPython 3.12+ made these singletons immortal
    (PEP 683), so there the bug is harmless; on 3.11 their counts fall by one
    per call until the interpreter aborts with "Fatal Python error:
    none_dealloc / bool_dealloc" — after a few thousand widget updates, or at
    exit.  Adding a huge count on 3.11 gives them the immortality they have
    on newer interpreters.  Returns whether anything was changed (only once
    per process).
    """
    if sys.implementation.name != "cpython" or sys.version_info >= (3, 12):
        return False
    if hasattr(sys, "getobjects"):  # a Py_TRACE_REFS build puts two links before the count
        return False
    changed = False
    for singleton in (None, True, False):
        # ob_refcnt is the first field of every object (outside Py_TRACE_REFS builds).
        refcount = ctypes.c_ssize_t.from_address(id(singleton))
        if refcount.value < PINNED_REFS // 2:
            refcount.value += PINNED_REFS
            changed = True
    return changed


pin_singletons()

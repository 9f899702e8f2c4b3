"""Process-wide interpreter settings shared by the window and the headless commands."""

from __future__ import annotations

import sys

GIL_SWITCH_S = 0.001
"""The longest a busy Python thread keeps another waiting for the GIL.

Python's default is 5 ms.  Every turn hands work back and forth between the
event loop, the storage thread and the model workers; with 5 ms a hand-over
could wait that long behind Python code on another thread (the window
stuttered by tens of milliseconds while storage loaded 10,000 messages, and a
turn's overhead had a 5 ms tail).  1 ms costs a little throughput on the
worker and keeps every wait short.
"""


def responsive_threads() -> None:
    """Short GIL hand-overs (see :data:`GIL_SWITCH_S`); idempotent."""
    sys.setswitchinterval(GIL_SWITCH_S)

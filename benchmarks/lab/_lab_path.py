"""Put ``benchmarks/`` on ``sys.path`` for the lab's scripts (not a benchmark itself).

The lab's one-off experiments import the suite's modules by their plain names
(``benchlib``, ``memory_qa``, ``memory_facts``, ``statement_echo``,
``keyword_latency``), as the scripts in ``benchmarks/`` do; run as
``.venv/bin/python benchmarks/lab/<name>.py`` Python only sees ``lab/``.  Each lab
script imports this module first, so the suite's modules stay where the suite
runs them and the lab needs no copies.
"""

from __future__ import annotations

import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[1]
if str(BENCHMARKS) not in sys.path:
    sys.path.insert(1, str(BENCHMARKS))

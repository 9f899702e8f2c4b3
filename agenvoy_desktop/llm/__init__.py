"""Qt-free llama.cpp layer: model files, the chat engine, embeddings.

Importing the package (which every module in it does first) bounds how long
llama.cpp's OpenMP threads spin after a computation, before llama.cpp's
OpenMP runtime is loaded: it reads ``GOMP_SPINCOUNT`` once, at load.  By
default a worker busy-waits about 1.5 ms after every llama.cpp call for the
next one; on a two-core machine that is a whole core taken from the window
and the storage thread after every embedding and every generated token
(measured: 1.6 ms before the caller even saw an embedding's result, and a
turn's bookkeeping ran slower right after one).  10,000 spins keep the
threads hot between the steps of one computation (fewer made a decode
slower: 7.1 ms instead of 5.0 for a short text) and let go within tens of
microseconds.  A value the user set is kept.
"""

import os

OPENMP_SPIN_COUNT = "10000"

os.environ.setdefault("GOMP_SPINCOUNT", OPENMP_SPIN_COUNT)

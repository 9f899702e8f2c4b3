"""The frozen app's entry point: the window and every CLI command in one executable.

``multiprocessing.freeze_support`` lets the document indexer's child process
(started with the ``spawn`` method) run from the same executable.
"""

import multiprocessing

from agenvoy_desktop.cli import main

if __name__ == "__main__":
    multiprocessing.freeze_support()
    raise SystemExit(main())

"""Qt-free document collections: what the user asked to have searched, and how it is read.

A *collection* is a name, one or more roots (folders or single files) and
include/exclude globs (:mod:`.collections`), listed in the profile's
registry file (:mod:`.registry`).  :mod:`.scan` walks the roots
(:mod:`.walk`) and compares what it finds with the last index's manifest,
so a re-index reads only what changed; :mod:`.readers` turn a file into
structured blocks and :mod:`.chunking` cuts those into citable chunks
(path, line range or page, heading trail).  :mod:`.index` keeps one
collection's chunks, full-text index and vectors in its own SQLite file,
:mod:`.indexer` brings it up to date, :mod:`.worker` does that in a child
process, and :mod:`.search` answers queries with citations.  Nothing here touches the
conversation memory: a broken document, or a broken collection registry,
never takes it down.
"""

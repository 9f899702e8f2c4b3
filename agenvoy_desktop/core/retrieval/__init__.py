"""The retrieval toolkit: the ranking rules every searchable store shares.

Qt-free and storage-free; each store keeps only its SQL and calls these.

- :mod:`.fts_text` — how text is prepared for FTS5 and how a user's words
  become safe, quoted query terms.
- :mod:`.planner` — which of those terms a search looks for: the rarest,
  under a postings budget (the store counts, the planner chooses).
- :mod:`.widen` — fetch ranked candidates, widening the fetch until enough
  survive the caller's filters.
- :mod:`.fusion` — weighted reciprocal rank fusion and its tuned constants.
- :mod:`.neighbours` — after fusion, a message also scores for its neighbours.
- :mod:`.parts` — how the semantic route ranks a message embedded in several parts.
- :mod:`.clip` — cutting text to a length, for prompts and embeddings.
"""

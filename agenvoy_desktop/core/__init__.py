"""Qt-free memory engine: history, archive, vectors, search, sessions."""

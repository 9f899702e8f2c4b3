"""Qt-free document collections (arrives with the documents issue)."""

"""Qt-free agent turn loop (arrives with the agent issue)."""

"""Qt-free llama.cpp engine: model files, embeddings (chat arrives later)."""

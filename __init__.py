"""earmark: build fine-grained audio-understanding benchmarks from raw audio, and score models on them."""

__version__ = "0.1.0"

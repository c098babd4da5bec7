"""descbench: reproducible evaluation of local image feature descriptors."""

__version__ = "0.1.0"

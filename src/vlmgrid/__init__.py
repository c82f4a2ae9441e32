"""vlmgrid: evaluate vision-language models on a grid of benchmarks, reproducibly."""

__version__ = "0.1.0"

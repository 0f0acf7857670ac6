"""Benchmarks of the trainers; run each as a module from the repository root
(`python -m bench.packing`, see its docstring)."""

"""Gemma fine-tuning on TinyStories with JAX (TPU first, runs on CPU for tests).

Entry point: ``python -m trainers.gemma_jax.train``; see README.md.
"""

"""Trainers shipped as images. Plain Python: nothing here imports Pulumi."""

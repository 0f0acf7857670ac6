"""Dataset staging: puts a stack's datasets below the bucket's datasets/<stack>/ prefix, once.

Runs as an in-cluster Job (`python -m trainers.staging ...`) with the bucket
prefix mounted; standard library only, so any trainer image can run it.
"""

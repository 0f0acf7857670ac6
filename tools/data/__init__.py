"""A run's data, checked on this machine before any accelerator time: `make check-data STACK= RUN=`
(`python -m tools.data check --stack s --run r`). See tools/data/check.py."""

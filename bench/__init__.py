"""Benchmarks: how the read paths and the stream pipeline scale.

Every figure is a ratio measured within one run (large size against small
size, pipeline against a bare loop), so that a shared, noisy machine slows
both sides alike. Run ``bench/run`` (or ``python -m bench``) from the
checkout; ``--help`` lists the sizes.
"""

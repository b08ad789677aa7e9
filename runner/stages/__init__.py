"""A run from payload to FullResult: preparation, stages, compiles, profiles, measurements (runner/__init__.py)."""

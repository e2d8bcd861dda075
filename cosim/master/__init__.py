"""Co-simulation: the unit protocol, units, partitioning a model into units, backends and the
master that advances them macro step by macro step.
"""

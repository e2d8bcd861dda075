"""Numerical algorithms shared by several phases, each written once.

- :mod:`.fixedpoint`: fixed-point acceleration (relaxation, Aitken, Anderson);
- :mod:`.graph`: strongly connected components, cycles, levels of a dependency graph;
- :mod:`.jacobian`: finite-difference Jacobians (forward or central, documented step rules);
- :mod:`.timegrid`: seconds <-> integer ticks, and named tolerances for time equality.
"""

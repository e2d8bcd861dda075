"""Numerical algorithms shared by several phases: fixed-point acceleration, graphs,
finite-difference Jacobians, tick and time arithmetic.
"""

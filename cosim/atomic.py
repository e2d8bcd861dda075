"""Atomic subsystems: a diagram compiled into its own plan and run as one block of its parent."""

"""Running one plan: the interpreter (Simulator), its run state, logs, checkpoints, loops,
atomic subsystems and analysis (linearize, steady states).
"""

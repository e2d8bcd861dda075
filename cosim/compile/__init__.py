"""The compile phase (pure): flatten virtual subsystems and build a :class:`~cosim.compile.plan.Plan`.
"""

"""The model as written: the block contract, diagrams, events, the block-type registry,
library references, and the evaluation phase (safe parameter expressions, scoped workspaces).
"""

"""The generated fast path: a plan's step function written as Python source over flat floats
(scalar) or numpy slices (vector), bit-identical to the interpreter.
"""

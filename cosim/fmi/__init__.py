"""FMI: the one choke point into fmpy (FMUs as blocks and units) and FMU export. Needs the
``fmi`` extra; nothing here is imported by ``import cosim``.
"""

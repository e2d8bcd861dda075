"""FMI: the one choke point into fmpy (FMUs as blocks and units) and FMU export. Needs the
``fmi`` extra; nothing here is imported by ``import cosim``.
"""

from cosim.cli import Command

#: ``cosim export-fmu`` (entry point group ``cosim.commands``).
EXPORT_FMU = Command("export an atomic subsystem as an FMI 2.0 FMU", "cosim.fmi.export:main")

"""Co-simulation: units advanced macro step by macro step by a master.

=====================  ==========================================================================
module                 its one job
=====================  ==========================================================================
``protocol``           the frozen messages a master and a unit exchange (versioned)
``units``              the unit contract (``Unit.handle``) and the in-process ``LocalUnit``
``partition``          which units a model becomes, and the links between their ports
``proxy``              the ``Proxy`` / ``Backend`` contract between the master and where units run
``backends``           the backend registry (entry points ``cosim.backends``), the local backend
``cosimulation``       a model co-simulated: partition, backends, master (the Simulator surface)
``master``             the macro loop
``calls``              batched unit calls, replies checked, events noted
``unitgraph``          links checked, the unit graph, algebraic couplings, stepping orders
``extrapolation``      inputs over a macro step from past macro points
``coupling``           iterating algebraic couplings (with rollback), co-initialization
``stepsize``           the macro-step grid and the adaptive macro step
``records``            typed per-step records (``StepRecord``, ``StepStatus``)
``central_logs``       the units' log batches gathered centrally
``checkpoints``        central checkpoints and their files
``recovery``           restarting units from the last central checkpoint
``observer``           the ``Observer`` a master calls as it runs (dashboards, progress)
=====================  ==========================================================================
"""

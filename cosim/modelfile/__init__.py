"""Model files: YAML text carrying what the Python API builds, read safely, every problem located.

A model file holds one model: its name, parameters, blocks, nested subsystems, library
references, connections, events and simulation options. A *library file* holds one subsystem
definition that model files reference by path. ``Model.from_yaml`` / :func:`load_model` read a
model file, ``model.to_yaml()`` / :func:`dump_model` write one, and :func:`load_subsystem` reads
a library file (the evaluation phase calls it for ``reference: something.yaml``).

Format
------
::

    version: 1                      # optional; the format version
    model: servo                    # model name (default: the file name)
    parameters:                     # the model workspace: values or "=expressions"
      kp: 0.8
      wn: =2*pi*0.5                 # a string starting with "=" is an expression
    blocks:                         # name -> entry, in diagram order
      ref:  {type: Sine, params: {frequency: 0.2, sample_time: 0.01}}
      err:  {type: Sum, params: {signs: "+-"}}
      ctrl:                         # a nested diagram
        type: Subsystem
        atomic: true                # default false (virtual)
        dt: 0.05                    # atomic only: dt, solver, options
        context: {k: =kp}           # this diagram's workspace
        blocks:
          e:  {type: Inport}        # Inport/Outport blocks are the subsystem's ports,
          kp: {type: Gain, params: {k: =k}}
          u:  {type: Outport}       # in the order they are listed
        connections:
          - [e.out, kp.in]
          - [kp.out, u.in]
      plant: {reference: motor.yaml, overrides: {R: 2.0}}   # or a registered library name
      send: {type: Goto, params: {tag: y, visibility: global}}
    connections:                    # [source output, destination input, more inputs...]
      - [ref.out, err.in1]
      - [plant.y, err.in2, send.in] # fan-out: one source, several destinations
      - [err.out, ctrl.e]
      - [ctrl.u, plant.u]
    events:                         # name -> event; actions are resets and stop (no code)
      hit:  {type: ZeroCrossing, watch: plant/x.out, direction: rising, stop: true}
      kick: {type: Scheduled, times: [1.0, 2.0], reset: {plant/x: [0.0]}}
    simulation:                     # SimulationConfig fields (dt and t_end required)
      dt: 0.01
      t_end: 10.0
      solver: RK4
      # cosim: {H: 0.05}          # co-simulate the atomic subsystems (CosimConfig fields)

An entry of ``blocks`` is exactly one of: a block (``type:`` a registered block type, see
:mod:`cosim.model.registry` and ``cosim blocks``; ``params:`` its constructor arguments by name,
as ``block.spec()`` gives them); a subsystem (``type: Subsystem`` with ``atomic``, ``context``,
``dt``, ``solver``, ``options``, ``blocks``, ``connections``); or a reference (``reference:``
a name registered with :func:`cosim.model.library.register` or a ``.yaml`` library file path,
relative to the referencing file; ``overrides:`` values for the definition's context).

A library file is a subsystem at top level::

    subsystem: motor                # the definition's name (a reference renames it)
    context: {R: 1.0, L: 0.5}       # defaults the reference's overrides replace
    blocks: {...}
    connections: [...]

Scalars follow the YAML 1.2 core schema: ``1e-3`` is a number, ``yes``/``on`` are strings, only
``true``/``false`` are booleans. Arrays are nested lists; a ``(period, offset)`` sample time is a
two-element list.

Safety and errors
-----------------
Files are read as plain data only: no tags (``!!python/object`` and every other tag is
refused), at most :data:`MAX_BYTES` bytes, :data:`MAX_DEPTH` levels of nesting and
:data:`MAX_VALUES` values with aliases expanded (an alias bomb is refused before it expands).
Block types come from the registry, references from the library registry or ``.yaml`` files:
a file can never name a module to import or run code. The structure is checked against
``cosim/modelfile/model_schema.json``, then the meaning (block types, parameter names, missing
parameters, blocks that cannot be built, expressions, connections, events, simulation options);
every problem found is reported in one :class:`~cosim.errors.CompileError`, each as
``file.yaml:LINE:COL: message``.

Modules
-------
:mod:`~cosim.modelfile.reader` reads YAML text safely into plain data with the position of
every value, :mod:`~cosim.modelfile.scalars` holds the core-schema scalar rules reading and
writing share, :mod:`~cosim.modelfile.schema` checks the data against the JSON Schema,
:mod:`~cosim.modelfile.build` turns it into model objects (with
:mod:`~cosim.modelfile.references` for library files), :mod:`~cosim.modelfile.load` is the
entry point that runs these steps, and :mod:`~cosim.modelfile.writer` writes models back.
"""

from cosim.model.expr import check_expression
from cosim.modelfile.load import load, load_model, load_subsystem
from cosim.modelfile.reader import MAX_BYTES, MAX_DEPTH, MAX_VALUES
from cosim.modelfile.schema import schema
from cosim.modelfile.writer import dump_model, dump_subsystem

__all__ = ["MAX_BYTES", "MAX_DEPTH", "MAX_VALUES", "check_expression", "dump_model",
           "dump_subsystem", "load", "load_model", "load_subsystem", "schema"]

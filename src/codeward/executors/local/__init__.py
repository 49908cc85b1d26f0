"""`executor="local"`: the model's code runs as compiled CPython bytecode under a policy.

- `executor`: `LocalExecutor`, which compiles, runs and limits each block;
- `policy`: RestrictedPython plus codeward's pass, deciding what code may say;
- `instrumenter`, `int_inference`, `type_inference`, `name_bindings`: what makes
  the limits hold cheaply (operation ticks, guard-free reads of plain values);
- `guards`: the names the compiled code calls (attribute, item, iteration, write);
- `imports`: the allow-list of the imports the model's code makes;
- `limits`: size caps and the operation budget; `watchdog`: the time limit;
- `output`: what the code prints, routed per thread; `data_policy`: numpy and
  pandas routes to files, pickle and eval.
"""

from codeward.executors.local.executor import LocalExecutor

__all__ = ["LocalExecutor"]

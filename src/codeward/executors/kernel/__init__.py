"""What every kernel-backed sandbox (jupyter, docker, e2b) shares.

- `session`: the kernel session over jupyter_client (ipc or TCP), its start and death;
- `executor`: `KernelExecutor`, the executor skeleton jupyter and docker build on;
- `bridge`: host tools over the kernel's stdin channel, and the bootstrap cell;
- `prelude`: the sandbox side of the bridge, shipped into the kernel as source;
- `cells`: a cell's results, bounded, turned into a `CodeOutput`;
- `folders`: the kernel's folders on the host, and the reaper of those whose owner died
  (`processes` tells a live owner from a dead one, for the docker reaper too).

Nothing is imported here: `session` needs jupyter_client, which e2b does not.
"""

"""One kernel's life, build side: :mod:`.session` (``KernelSession``: start with the hook, a cell
until idle, timeouts, death, shutdown), :mod:`.hook_call` (the launch request that loads the
kernel-side hook, and what is read back after each cell), :mod:`.iopub` (IOPub messages made
nbformat outputs, bounded) and :mod:`.processes` (how a session's kernel ends: its process tree
and orphans killed, its death in words)."""

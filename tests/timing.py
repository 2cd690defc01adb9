"""Every wait, limit and bound on time that the tests set, named once, each with its reason.

The suite runs two tests at a time on two cores that other work shares (``make test``: ``-n
auto``), so a test must not pass or fail by how loaded the machine is. Three kinds:

- *Limits* only a hang reaches: how long a test lets a process, a cell or a wait take before it
  gives up. Generous (minutes where a build is waited for): a test that reaches one has failed
  already, and a short one would fail a sound test on a loaded machine.
- *Polls and settles*: how often a wait loop looks again, and the pauses that let something
  outside the test happen first (a watcher start, a file's time stamp age).
- *Bounds* a test asserts: the product's own claims about time (a build that a signal ends
  within seconds). A test whose claim is elapsed time is marked ``wallclock`` (pyproject.toml),
  which the version matrix leaves out.

Not here: how long a cell's own code sleeps (``time.sleep(1000)``: the scenario a test builds,
a cell that runs until it is killed; the fakes' simulated durations), the timeouts that are the
arguments of the code under test (a cell's ``:timeout:``, the drain's ``timeout``, Dask's connect
timeout of a cluster that cannot be reached), and the ``livecells_timeout`` that a test's book
sets in its conf.py, which is that book's setting.
"""

from __future__ import annotations

# -- Limits only a hang reaches ------------------------------------------------------------------

#: A ``sphinx-build``, ``python -m livecells`` or latexmk process that a test runs to its end.
PROCESS = 300
#: A Python that a test starts for one check and no build (an import, a short script).
PYTHON_CHECK = 120
#: A cell that a test runs in a real kernel through ``KernelSession.run_cell`` (its limit; the
#: floods of kernel/test_output_bounds.py are its slowest, 64 MB each).
CELL = 120
#: The reference runs of the same cells, nbclient's limit for each (Jupyter's own executor).
ORACLE_CELL = 300
#: The reference runs of d2l chapters in the TensorFlow and JAX environments (d2l's heavier cells).
ORACLE_CELL_FRAMEWORKS = 600
#: A build, kernel, template or worker reaching the point a test waits for (a file it writes, a
#: line it prints, a template started): a loaded machine's slowest start of a kernel and its imports.
REACH = 120
#: A process that was told to end exiting, where how soon is not the subject (the build that a
#: signal ended, whose time is asserted apart; a server thread; a watcher stopped at the end).
EXIT = 60
#: A ``dask.distributed`` client's connection, and the cluster's workers joining it.
CLUSTER = 60
#: An event or a state of a thread in this process (the hook's reader of a test's pipe): at once;
#: this is a loaded machine's "at once".
THREAD = 5.0
#: tests/envs/make.sh making a TensorFlow or JAX environment (~2 GB, the first time).
ENV_BUILD = 1800
#: Playwright: how long an element may take to appear or change (its default, in ms).
BROWSER_MS = 10_000
#: Playwright, on the page whose MathJax typesets (MathJax starts late on a loaded machine).
MATHJAX_MS = 20_000
#: pytest-timeout for a walk over linked folders that would never end if the links were followed.
ENDLESS_WALK = 60
#: pytest-timeout for two builds of a book whose depends glob walks linked folders.
LINKED_BUILD = 120
#: pytest-timeout for one kernel flooding the build with ten outputs of 64 MB.
FLOODS = 300

# -- Polls and settles ---------------------------------------------------------------------------

#: How often a wait loop looks again.
POLL = 0.05
#: For what a test just started or wrote to get where the test needs it before it goes on: a
#: file that appeared finished, a thread at its wait, a file's time stamp older than a start.
SETTLE = 0.1
#: For the processes that a just-started child starts in turn (its daemon, its sleeper) to exist.
CHILD_START = 0.3
#: For a sphinx-build whose template imports a slow module to be waiting on that import.
IMPORT_UNDER_WAY = 1.0
#: ipykernel's parent poller looks every second: a pause it must have looked within.
PARENT_POLL = 1.5
#: sphinx-autobuild watches a little after it says it does.
WATCHER_START = 3
#: For a build that the store's own write would start, if it did (the subject: none does).
SPURIOUS_BUILD = 8
#: A pseudo-terminal's reader: a build's whole run in a real kernel, read line by line.
TERMINAL_BUILD = 180

# -- Bounds asserted: the product's claims -------------------------------------------------------

#: A session's processes, and a killed tree, end within this of their session's end (the guard
#: and the reaper act at once; the rest is the kernel's exit).
GONE = 3.0
#: A template whose build was killed ends within this (docs/errors.rst: it dies with its build).
TEMPLATE_GONE = 1.0
#: Templates kept warm that a build stops, or whose owner went, end within this.
WARM_GONE = 5.0
#: A process sent SIGKILL exits at once; this is a loaded machine's "at once".
KILLED = 5.0
#: The reaper's guard, its pipe closed (its build died), kills what it watched and exits.
GUARD_EXIT = 10.0
#: The kernels of a Dask run that was cancelled, or of a worker that was lost, end within this.
CANCELLED_GONE = 10.0
#: A Dask worker whose process is killed or closes: its templates and kernels end within this.
KILLED_WORKER_GONE = 15.0
#: A Dask worker closing with a busy session: its kernels end within this.
CLOSING_WORKER_GONE = 20.0
#: A Dask scheduler told to end (SIGTERM), or a worker after its second SIGTERM, exits within this.
DASK_EXIT = 30.0
#: A Dask worker that must end although its task holds on exits within this.
WORKER_EXIT = 60.0
#: How long a test waits for what may or may not happen (Dask's second cancellation of a closing
#: worker): the whole wait where it does not, so short.
MAY_HAPPEN = 10.0
#: Ctrl-C, SIGTERM and kill -9 end a build within this, mid-cell or in a template's import.
SIGNAL_ENDS_BUILD = 2.0
#: A cluster that cannot be reached is reported within this (no retries until a long timeout).
UNREACHABLE_EXECUTOR = 6.0

# -- Slack of the wall-clock bounds (tests marked wallclock) ---------------------------------------

#: How late past its due time (a reader's 0.1 s, a held chunk's 0.15 s) the drain may return.
WAKE_SLACK = 2.0
#: How long the drain of a pipe that no one reads may take past its 0.2 s timeout, all told.
PAST_TIMEOUT = 1.5
#: What counts as no wait at all for a drain with no ipykernel pipe.
NO_WAIT = 0.1
#: What counts as no wait at all for a drain whose reader is idle (no system call beyond /proc).
NO_WAIT_IDLE = 0.05
#: The upper bound of a timed cell that sleeps under half a second: the hook times the cell, not
#: the round trip, so far under this.
TIMED_CELL = 5.0
#: A forked kernel's check of its parent (ipykernel's parent poller, patched by the template).
PARENT_CHECK = 1.0
#: A kernel's death (``os._exit``) seen by its session.
DEATH_SEEN = 5.0
#: The timing line of a cell that sleeps 0.3 s (torch's kernel, after its sync) within this of it.
TIMED_SLEEP = 0.04
#: The median of five sleeps of 0.5 s within this fraction of 0.5 s, on a loaded machine.
MEDIAN_OF_SLEEPS = 0.02

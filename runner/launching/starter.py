"""How the processes of one run are started: forked from the warm runner when one serves this runner (fast: Python
and torch already imported), else cold under runner/confinement/confine.py. Either way with the run's confinement."""

from __future__ import annotations

import functools
from collections.abc import Callable

from runner.confinement.sandbox import RunSandbox
from runner.launching.chain import ChainStage, run_chain
from runner.launching.process import ProcessOutcome, run_process
from runner.launching.warm_client import WarmLauncher, WarmUnavailable

# The example harness (problems/examples/eval.py) takes its seed from a pipe named by this variable, read only
# after its worker was forked; a forked harness given that pipe needs neither POPCORN_SEED nor its re-exec.
SEED_FD_VARIABLE = "KERNELBOT_HARNESS_SEED_FD"


def seed_pipe_variable(main_source: str | None) -> str | None:
    """The seed-pipe variable when the harness's main file speaks it, else None (the seed then travels as
    POPCORN_SEED into a freshly exec'd harness, which is what every harness understands)."""
    return SEED_FD_VARIABLE if main_source and SEED_FD_VARIABLE in main_source else None


class Starter:
    def __init__(self, box: RunSandbox, warm: WarmLauncher | None = None, seed_fd_variable: str | None = None) -> None:
        self.box, self.warm, self.seed_fd_variable = box, warm, seed_fd_variable

    def run(self, argv: list[str], *, timeout: float, ranks: int = 1, **options) -> ProcessOutcome:
        """run_process for one process of the run, in its working directory, confined, strays reaped."""
        options = {"cwd": str(self.box.run_dir), "timeout": timeout, "reap": self.box.kill_strays, **options}
        if self.warm is not None and self.warm.available():
            launch = functools.partial(self.warm.launch, confine=self.box.confinement(timeout, ranks),
                                       seed_fd_variable=self.seed_fd_variable)
            try:
                return run_process(argv, launch=launch, **options)
            except WarmUnavailable:
                pass  # the server went away: this process starts cold, as without one
        return run_process(self.box.wrap(argv, timeout, ranks), **options)

    def run_chain(self, argv: list[str], stages: list[ChainStage], *, proceed: Callable[[int, ProcessOutcome], bool],
                  ranks: int = 1, **options) -> list[ProcessOutcome]:
        """runner/launching/chain.py's run_chain for the run's one harness process: confined for the sum of the stages'
        timeouts (each stage's own timeout is enforced by the chain), forked warm where a warm runner serves."""
        timeout = sum(stage.timeout for stage in stages)
        options = {"cwd": str(self.box.run_dir), "reap": self.box.kill_strays, "proceed": proceed, **options}
        if self.warm is not None and self.warm.available():
            launch = functools.partial(self.warm.launch, confine=self.box.confinement(timeout, ranks),
                                       seed_fd_variable=self.seed_fd_variable)
            try:
                return run_chain(argv, stages, launch=launch, **options)
            except WarmUnavailable:
                pass  # the server went away before the process started: it starts cold
        return run_chain(self.box.wrap(argv, timeout, ranks), stages, **options)

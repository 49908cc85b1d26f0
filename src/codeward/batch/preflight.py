"""What a batch's jobs share, settled before the first job runs: the models they call.

Each distinct litellm model id the jobs use (their own ``model``, or the command line's) is
checked once, as `codeward run` would find it at its first call (`models.setup_problem`): a
provider litellm does not know, and an API key missing from the environment. Either would
fail every job that uses the model, one after another; found here, the batch stops at once
(exit 2) with nothing run, naming the jobs and the variable to set. ``script:`` and ``replay:``
models need no provider and no key. Keys are checked only where the jobs run with this
environment (worker processes here, or a Ray cluster started for the run): a Ray cluster
joined by address has its own.
"""

from __future__ import annotations

from pathlib import Path

from codeward.batch.jobs import Job, JobDefaults, JobPlace, load_placed_jobs, refuse
from codeward.wording import counted

__all__ = ["model_faults", "settled_jobs"]

#: The jobs a fault names in full; the others are counted.
_NAMED = 5


def settled_jobs(path: str | Path, defaults: JobDefaults, model_option: str, keys: bool = True) -> list[Job]:
    """The file's jobs, checked (`load_jobs`), and their models settled; raise `JobFileError` on any fault."""
    jobs, places = load_placed_jobs(path, defaults)
    refuse(Path(path), model_faults(jobs, places, model_option, keys))
    return jobs


def model_faults(jobs: list[Job], places: dict[str, JobPlace], model_option: str, keys: bool = True) -> list[str]:
    """A fault per litellm model that cannot be called as this environment is set up, naming the jobs that
    use it: by their place for a model they name, by `model_option` (``--model``) for the command line's."""
    using: dict[str, list[Job]] = {}
    for job in jobs:
        using.setdefault(job.model, []).append(job)
    litellm_ids = [model for model in using if not model.startswith(("script:", "replay:"))]
    if not litellm_ids:
        return []  # litellm is not even imported
    from codeward.platform.models import setup_problem

    faults = []
    for model in litellm_ids:
        problem = setup_problem(model, keys=keys)
        if problem is not None:
            faults.append(f"{_users(using[model], places, model_option)}: {problem}")
    return faults


def _users(jobs: list[Job], places: dict[str, JobPlace], model_option: str) -> str:
    """The jobs that use one model, as a fault names them."""
    own = [f"{places[job.id].where} (id {job.id!r})" for job in jobs if places[job.id].own_model]
    given = len(jobs) - len(own)
    named = ", ".join(own[:_NAMED]) + (f" and {len(own) - _NAMED} more" if len(own) > _NAMED else "")
    parts = [f"{named}, field 'model'"] if own else []
    if given:
        parts.append(f"{model_option} (used by {counted(given, 'job')} naming no model)")
    return "; ".join(parts)

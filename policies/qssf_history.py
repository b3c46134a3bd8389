"""Helios' history estimator of a job's GPU time (service), learned from finished jobs.

The rules of Helios' `NaiveEstimator.inference` (HeliosArtifact, `framework/QSSF
Service/estimators/estimator.py`), kept as running sums so an estimate costs a few dict
look-ups (plus, for a name never seen, one fuzzy match over the names seen):

1. The names seen that are close to the job's name: `difflib.get_close_matches(name,
   names, n=2, cutoff=0.6)` (the name itself first when it was seen).
2. The name itself was seen: the user's finished jobs of that name; none: the mean run
   time of every user's jobs of that name, times the job's GPUs.
3. Only other names are close: the user's finished jobs of those names; none: the mean
   run time of every user's jobs of those names, times the GPUs.
4. No close name: the mean run time of the user's finished jobs, else of every finished
   job, times the GPUs.

In 2 and 3 the user's jobs of the same GPU count are used when there are any (else all of
the user's matched jobs), and the estimate is `int(mean run time x GPUs)`, as Helios'
`check_history_job` truncates it. Aggregation is the mean (Helios' `agg_method`).
A job without a name (an empty `name`) matches no name and goes to rule 4. With no
finished job at all the estimate is 0: such jobs rank first, in arrival order (Helios
starts from months of earlier jobs; a run here starts empty).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field

__all__ = ["MATCH_CUTOFF", "MATCHES", "Sums", "ServiceHistory"]

MATCHES = 2
"""Names matched (Helios' `match_num`)."""

MATCH_CUTOFF = 0.6
"""Least `difflib` similarity of a close name (Helios' `cutoff`)."""


@dataclass
class Sums:
    """Run times summed and counted (one running mean)."""

    total: float = 0.0
    count: int = 0

    def add(self, duration: float) -> None:
        """One more finished job of this run time."""
        self.total += duration
        self.count += 1

    def merge(self, other: Sums | None) -> None:
        """Add another set of jobs."""
        if other is not None:
            self.total += other.total
            self.count += other.count


@dataclass
class ServiceHistory:
    """Finished jobs' run times by user, name and GPU count; estimates as Helios' code."""

    everyone: Sums = field(default_factory=Sums)
    by_user: dict[str, Sums] = field(default_factory=dict)
    by_name: dict[str, Sums] = field(default_factory=dict)
    by_user_name: dict[tuple[str, str], Sums] = field(default_factory=dict)
    by_user_name_gpus: dict[tuple[str, str, int], Sums] = field(default_factory=dict)
    names: list[str] = field(default_factory=list)  # names seen, in the order first seen

    def add(self, user: str, name: str, gpus: int, duration: float) -> None:
        """A job finished (Helios' `update_train_data`, called at each job's end)."""
        self.everyone.add(duration)
        self.by_user.setdefault(user, Sums()).add(duration)
        if name:
            if name not in self.by_name:
                self.names.append(name)
                self.by_name[name] = Sums()
            self.by_name[name].add(duration)
            self.by_user_name.setdefault((user, name), Sums()).add(duration)
            self.by_user_name_gpus.setdefault((user, name, gpus), Sums()).add(duration)

    def close_names(self, name: str) -> list[str]:
        """The seen names close to `name`, best first (the name itself when seen)."""
        if not name:
            return []
        if name in self.by_name:  # similarity 1: no other name ranks before it
            return [name]
        return difflib.get_close_matches(name, self.names, n=MATCHES, cutoff=MATCH_CUTOFF)

    def service(self, user: str, name: str, gpus: int) -> float:
        """Estimated GPU time (s x GPUs) of a job of `user`, `name` and `gpus` GPUs."""
        matches = self.close_names(name)
        if not matches:
            own = self.by_user.get(user)
            base = own if own is not None and own.count else self.everyone
            return base.total / base.count * gpus if base.count else 0.0
        mine = Sums()
        same_gpus = Sums()
        for m in matches:
            mine.merge(self.by_user_name.get((user, m)))
            same_gpus.merge(self.by_user_name_gpus.get((user, m, gpus)))
        if not mine.count:  # the user never ran these names: everyone's jobs of them
            anyone = Sums()
            for m in matches:
                anyone.merge(self.by_name.get(m))
            return anyone.total / anyone.count * gpus
        use = same_gpus if same_gpus.count else mine
        return float(int(use.total / use.count * gpus))

"""`slurm`: Slurm's schedulers simulated from a slurm.conf and a `sacctmgr dump` file."""

from schedlab.policies.slurm.policy import SlurmPolicy

__all__ = ["SlurmPolicy"]

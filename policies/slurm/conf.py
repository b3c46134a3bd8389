"""The scheduling part of a `slurm.conf`: partitions, priority weights, scheduler parameters.

Read as `src/common/read_config.c` reads it (keys case-insensitive, `#` comments). Keys
that change scheduling are parsed; daemon settings (hosts, ports, logs, plugins that do
not schedule) are accepted in `NO_EFFECT` and change nothing; any other key, and any
value the simulation does not model, is an error naming the file, line, key and value.
Defaults are Slurm's (`slurm.conf(5)`, 22.05-24.x), noted per field.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from schedlab.sim.errors import InvalidParameter, InvalidTopology
from schedlab.topologies.slurm_conf import ConfLine, conf_lines, expand_hostlist

INFINITE = math.inf

NO_EFFECT = frozenset(k.lower() for k in (
    "ClusterName", "SlurmctldHost", "ControlMachine", "ControlAddr", "BackupController",
    "SlurmUser", "SlurmdUser", "SlurmctldPort", "SlurmdPort", "AuthType", "AuthAltTypes",
    "CredType", "CryptoType", "StateSaveLocation", "SlurmdSpoolDir", "SlurmctldPidFile",
    "SlurmdPidFile", "SlurmctldLogFile", "SlurmdLogFile", "SlurmSchedLogFile",
    "SlurmSchedLogLevel", "SlurmctldDebug", "SlurmdDebug", "DebugFlags", "ProctrackType",
    "TaskPlugin", "TaskPluginParam", "ReturnToService", "MpiDefault", "SwitchType",
    "JobCompType", "JobCompLoc", "JobAcctGatherType", "JobAcctGatherFrequency",
    "AccountingStorageType", "AccountingStorageHost", "AccountingStoragePort",
    "AccountingStorageTRES", "AccountingStoreFlags", "AcctGatherNodeFreq", "MailProg",
    "InactiveLimit", "KillWait", "MinJobAge", "SlurmctldTimeout", "SlurmdTimeout",
    "Waittime", "LaunchParameters", "PluginDir", "SlurmdParameters", "PrologFlags",
    "MaxJobCount", "FirstJobId", "MessageTimeout", "TmpFS", "GresTypes",
    "SelectTypeParameters", "TopologyPlugin", "SlurmctldParameters", "CommunicationParameters",
    "JobSubmitPlugins", "HealthCheckProgram", "HealthCheckInterval", "Epilog", "Prolog",
    "UsePAM", "MaxArraySize", "TreeWidth", "SlurmdLogFile", "CoreSpecPlugin",
    "FrontendName", "SrunPortRange", "RebootProgram", "ResumeTimeout", "SuspendTime",
    "PriorityWeightAssoc", "AccountingStorageUser", "AccountingStoragePass",
    "JobCompHost", "JobCompPort", "JobCompUser", "JobCompPass", "PropagateResourceLimits",
    "PropagateResourceLimitsExcept", "KillOnBadExit", "OverTimeLimit", "MinJobAge",
    "UnkillableStepTimeout", "BatchStartTimeout", "CompleteWait", "GetEnvTimeout",
    "DefMemPerCPU", "DefMemPerNode",
))
"""Daemon and site settings that do not change which job starts when (accepted, no effect).
`PriorityWeightAssoc` is listed since associations carry no priority in `sacctmgr dump`."""

SCHED_PARAMS = ("bf_interval", "bf_window", "bf_resolution", "bf_max_job_test",
                "bf_continue", "sched_interval", "default_queue_depth")
PRIORITY_FLAGS = ("FAIR_TREE", "NO_FAIR_TREE", "NO_NORMAL_PART", "NO_NORMAL_QOS")
PREEMPT_MODES = ("OFF", "REQUEUE", "SUSPEND")
PARTITION_KEYS = ("PartitionName", "Nodes", "MaxTime", "DefaultTime", "PriorityTier",
                  "PriorityJobFactor", "Priority", "PreemptMode", "Default", "State",
                  "TRESBillingWeights", "AllowAccounts", "AllowQos", "OverSubscribe",
                  "QOS")


def parse_time(text: str) -> float:
    """A Slurm time string in seconds (`time_str2mins` of src/common/parse_time.c).

    Minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS; UNLIMITED/INFINITE -> inf.
    """
    t = text.strip().upper()
    if t in ("UNLIMITED", "INFINITE", "-1"):
        return INFINITE
    m = re.fullmatch(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?", t)
    if not m:
        raise ValueError(f"{text!r} is not a Slurm time (minutes, MM:SS, HH:MM:SS, D-HH:MM:SS "
                         "or UNLIMITED)")
    d, a, b, c = m.groups()
    if d is not None:  # D-HH[:MM[:SS]]
        return int(d) * 86400 + int(a) * 3600 + int(b or 0) * 60 + int(c or 0)
    if c is not None:
        return int(a) * 3600 + int(b) * 60 + int(c)
    if b is not None:
        return int(a) * 60 + int(b)
    return int(a) * 60.0


@dataclass(frozen=True)
class Partition:
    """A PartitionName line (`part_record_t`)."""

    name: str
    nodes: tuple[str, ...] | None  # None: ALL
    max_time: float = INFINITE
    default_time: float | None = None
    priority_tier: int = 1
    job_factor: int = 1
    preempt_mode: str | None = None  # None: the cluster's PreemptMode
    billing: tuple[tuple[str, float], ...] = ()  # TRESBillingWeights (CPU, Mem per GB, gpu)
    allow_accounts: tuple[str, ...] | None = None
    allow_qos: tuple[str, ...] | None = None
    qos: str = ""  # partition QOS (its limits apply to jobs of the partition)
    default: bool = False


@dataclass(frozen=True)
class SlurmConf:
    """What of a slurm.conf decides when jobs start."""

    file: str
    partitions: dict[str, Partition]
    default_partition: str
    backfill: bool = True  # SchedulerType=sched/backfill (Slurm's default)
    multifactor: bool = False  # PriorityType=priority/multifactor (default priority/basic)
    weight_age: int = 0
    weight_fairshare: int = 0
    weight_jobsize: int = 0
    weight_partition: int = 0
    weight_qos: int = 0
    max_age: float = 7 * 86400.0  # PriorityMaxAge 7-0
    decay_half_life: float = 7 * 86400.0  # PriorityDecayHalfLife 7-0
    calc_period: float = 300.0  # PriorityCalcPeriod 5 (minutes)
    favor_small: bool = False
    fair_tree: bool = True  # the default since 19.05 (PriorityFlags=NO_FAIR_TREE: classic)
    no_normal_part: bool = False
    no_normal_qos: bool = False
    preempt_type: str = "preempt/none"
    preempt_mode: str = "OFF"
    enforce_limits: bool = False  # AccountingStorageEnforce has limits (or qos/safe)
    bf_interval: float = 30.0
    bf_window: float = 86400.0  # bf_window=1440 minutes
    bf_resolution: float = 60.0
    bf_max_job_test: int = 500
    bf_continue: bool = False
    sched_interval: float = 60.0
    default_queue_depth: int = 100
    extra: dict[str, str] = field(default_factory=dict)


def _bad(file: Path, line: ConfLine, key: str, value: str, allowed: str) -> InvalidParameter:
    return InvalidParameter(f"{file}: line {line.lineno}: {key}={value!r}: allowed: {allowed}")


def _uint(file: Path, line: ConfLine, key: str, value: str) -> int:
    if not value.isdigit():
        raise _bad(file, line, key, value, "an integer >= 0")
    return int(value)


def _time(file: Path, line: ConfLine, key: str, value: str) -> float:
    try:
        return parse_time(value)
    except ValueError as exc:
        raise _bad(file, line, key, value, str(exc).split(" is ", 1)[1]) from None


def _billing(file: Path, line: ConfLine, value: str) -> tuple[tuple[str, float], ...]:
    out = []
    for item in value.split(","):
        k, _, v = item.partition("=")
        key = k.strip().lower()
        if key not in ("cpu", "mem", "gres/gpu"):
            raise _bad(file, line, "TRESBillingWeights", value, "CPU=, Mem=, GRES/gpu= weights")
        scale = 1.0
        if key == "mem":  # per MB unless suffixed (Mem=.25G: per GB)
            if v.upper().endswith("G"):
                v = v[:-1]
            else:
                scale = 1024.0
        try:
            out.append((key, float(v) * scale))
        except ValueError:
            raise _bad(file, line, "TRESBillingWeights", value, "numbers as weights") from None
    return tuple(out)


def _partition(file: Path, line: ConfLine, defaults: dict[str, str]) -> Partition:
    attrs = {**defaults, **{k: v for k, v in line.pairs[1:]}}
    for k, v in attrs.items():
        if k not in PARTITION_KEYS:
            raise _bad(file, line, k, v, "PartitionName keys " + ", ".join(PARTITION_KEYS[1:]))
    name = line.head[1]
    nodes_text = attrs.get("Nodes", "ALL")
    nodes = None if nodes_text.upper() == "ALL" else tuple(expand_hostlist(nodes_text))
    tier = factor = 1
    if "Priority" in attrs:
        tier = factor = _uint(file, line, "Priority", attrs["Priority"])
    if "PriorityTier" in attrs:
        tier = _uint(file, line, "PriorityTier", attrs["PriorityTier"])
    if "PriorityJobFactor" in attrs:
        factor = _uint(file, line, "PriorityJobFactor", attrs["PriorityJobFactor"])
    mode = attrs.get("PreemptMode")
    if mode is not None:
        mode = mode.upper().replace(",GANG", "")
        if mode not in PREEMPT_MODES:
            raise _bad(file, line, "PreemptMode", attrs["PreemptMode"], ", ".join(PREEMPT_MODES))
    state = attrs.get("State", "UP").upper()
    if state != "UP":
        raise _bad(file, line, "State", attrs["State"], "UP")
    over = attrs.get("OverSubscribe", "NO").upper()
    if over not in ("NO", "EXCLUSIVE"):
        raise _bad(file, line, "OverSubscribe", attrs["OverSubscribe"], "NO or EXCLUSIVE "
                   "(GPUs are never shared)")
    default_flag = attrs.get("Default", "NO").upper()
    if default_flag not in ("YES", "NO"):
        raise _bad(file, line, "Default", attrs["Default"], "YES or NO")

    def names(key: str) -> tuple[str, ...] | None:
        v = attrs.get(key)
        return None if v is None or v.upper() == "ALL" else tuple(v.split(","))

    return Partition(
        name=name, nodes=nodes,
        max_time=_time(file, line, "MaxTime", attrs.get("MaxTime", "UNLIMITED")),
        default_time=(_time(file, line, "DefaultTime", attrs["DefaultTime"])
                      if "DefaultTime" in attrs else None),
        priority_tier=tier, job_factor=factor, preempt_mode=mode,
        billing=_billing(file, line, attrs["TRESBillingWeights"])
        if attrs.get("TRESBillingWeights") else (),
        allow_accounts=names("AllowAccounts"), allow_qos=names("AllowQos"),
        qos=attrs.get("QOS", ""), default=default_flag == "YES")


def read_slurm_conf(path: str | Path) -> SlurmConf:
    """Parse the scheduling settings of a slurm.conf (see the module doc)."""
    file = Path(path)
    if not file.is_file():
        raise InvalidParameter(f"config {str(path)!r}: no such file; allowed: a slurm.conf")
    kw: dict[str, object] = {}
    parts: dict[str, Partition] = {}
    part_defaults: dict[str, str] = {}
    try:
        lines = list(conf_lines(file))
    except InvalidTopology as exc:
        raise InvalidParameter(str(exc)) from None
    for line in lines:
        key, value = line.head
        low = key.lower()
        if low == "nodename":
            continue  # the topology's (topologies/slurm_conf.py)
        if low == "partitionname":
            if value.upper() == "DEFAULT":
                part_defaults.update(dict(line.pairs[1:]))
                continue
            if value in parts:
                raise _bad(file, line, key, value, "a partition defined once")
            parts[value] = _partition(file, line, part_defaults)
            continue
        if len(line.pairs) > 1:
            raise _bad(file, line, key, value, "one Key=Value a line outside NodeName and "
                       "PartitionName lines")
        _setting(file, line, low, key, value, kw)
    if not parts:
        raise InvalidParameter(f"{file}: no PartitionName line; allowed: one or more partitions")
    defaults = [p.name for p in parts.values() if p.default]
    if len(defaults) > 1:
        raise InvalidParameter(f"{file}: Default=YES on partitions {defaults}: allowed: one")
    default = defaults[0] if defaults else next(iter(parts))
    return SlurmConf(file=str(file), partitions=parts, default_partition=default,
                     **kw)  # type: ignore[arg-type]


def _setting(file: Path, line: ConfLine, low: str, key: str, value: str,
             kw: dict[str, object]) -> None:
    """One `Key=Value` line outside NodeName/PartitionName lines into `kw`."""
    weights = {"priorityweightage": "weight_age", "priorityweightfairshare": "weight_fairshare",
               "priorityweightjobsize": "weight_jobsize",
               "priorityweightpartition": "weight_partition",
               "priorityweightqos": "weight_qos"}
    if low in weights:
        kw[weights[low]] = _uint(file, line, key, value)
    elif low == "schedulertype":
        if value not in ("sched/backfill", "sched/builtin"):
            raise _bad(file, line, key, value, "sched/backfill, sched/builtin")
        kw["backfill"] = value == "sched/backfill"
    elif low == "prioritytype":
        if value not in ("priority/multifactor", "priority/basic"):
            raise _bad(file, line, key, value, "priority/multifactor, priority/basic")
        kw["multifactor"] = value == "priority/multifactor"
    elif low in ("prioritymaxage", "prioritydecayhalflife"):
        t = _time(file, line, key, value)
        kw["max_age" if low == "prioritymaxage" else "decay_half_life"] = \
            0.0 if math.isinf(t) else t
    elif low == "prioritycalcperiod":
        kw["calc_period"] = _time(file, line, key, value)
    elif low == "priorityfavorsmall":
        if value.upper() not in ("YES", "NO"):
            raise _bad(file, line, key, value, "YES, NO")
        kw["favor_small"] = value.upper() == "YES"
    elif low == "priorityflags":
        flags = [f.strip().upper() for f in value.split(",") if f.strip()]
        for f in flags:
            if f not in PRIORITY_FLAGS:
                raise _bad(file, line, key, value, ", ".join(PRIORITY_FLAGS))
        kw["fair_tree"] = "NO_FAIR_TREE" not in flags
        kw["no_normal_part"] = "NO_NORMAL_PART" in flags
        kw["no_normal_qos"] = "NO_NORMAL_QOS" in flags
    elif low == "priorityusageresetperiod":
        if value.upper() != "NONE":
            raise _bad(file, line, key, value, "NONE (usage resets are not modelled)")
    elif low == "preempttype":
        if value not in ("preempt/none", "preempt/partition_prio", "preempt/qos"):
            raise _bad(file, line, key, value,
                       "preempt/none, preempt/partition_prio, preempt/qos")
        kw["preempt_type"] = value
    elif low == "preemptmode":
        mode = value.upper().replace(",GANG", "")
        if mode not in PREEMPT_MODES:
            raise _bad(file, line, key, value, ", ".join(PREEMPT_MODES) + " (CANCEL and "
                       "GANG time-slicing are not modelled)")
        kw["preempt_mode"] = mode
    elif low == "accountingstorageenforce":
        opts = {o.strip().lower() for o in value.split(",")}
        kw["enforce_limits"] = bool(opts & {"limits", "qos", "safe"})
    elif low == "selecttype":
        if value not in ("select/cons_tres", "select/cons_res"):
            raise _bad(file, line, key, value, "select/cons_tres, select/cons_res")
    elif low == "enforcepartlimits":
        if value.upper() not in ("NO", "YES", "ALL", "ANY"):
            raise _bad(file, line, key, value, "NO, YES, ALL, ANY")
    elif low == "schedulerparameters":
        _sched_params(file, line, key, value, kw)
    elif low not in NO_EFFECT:
        raise _bad(file, line, key, value, "a slurm.conf key schedlab models or knows to have "
                   "no effect on scheduling (see docs/slurm.md)")


def _sched_params(file: Path, line: ConfLine, key: str, value: str,
                  kw: dict[str, object]) -> None:
    for item in value.split(","):
        k, _, v = item.strip().partition("=")
        if k not in SCHED_PARAMS:
            raise _bad(file, line, key, item, ", ".join(SCHED_PARAMS))
        if k == "bf_continue":
            kw["bf_continue"] = True
            continue
        if not v.isdigit() or int(v) < (0 if k == "default_queue_depth" else 1):
            raise _bad(file, line, key, item, f"{k}=an integer >= 1")
        n = int(v)
        kw[{"bf_window": "bf_window"}.get(k, k)] = (
            n * 60.0 if k == "bf_window" else float(n) if k in (
                "bf_interval", "bf_resolution", "sched_interval") else n)

"""Accounts, users and QOS from a file in `sacctmgr dump` format.

`sacctmgr dump CLUSTER file=F` writes `Cluster - 'c':...`, then blocks of `Parent -
'acct'` followed by the `Account - 'name':Key=Value...` and `User - 'name':...` lines
under that parent (src/sacctmgr/file_functions.c). Read here: `Fairshare` (an integer;
`parent` is not modelled), `DefaultAccount`, `DefaultQOS`, `QOS` (the QOS a user may
use), `GrpTRES` (only `gres/gpu=N`); `Description`, `Organization`, `AdminLevel`,
`Coordinators` have no effect. The dump has no QOS definitions, so this file may add
lines `QOS - 'name':Priority=N:Preempt='a,b':PreemptMode=requeue:GrpTRES=gres/gpu=N:
UsageFactor=X` (schedlab's extension, the fields of `sacctmgr add qos`). Without a QOS
line, QOS `normal` exists with priority 0 and no limit, as after a Slurm install.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from schedlab.sim.errors import InvalidParameter

ASSOC_KEYS = {"fairshare", "defaultaccount", "defaultqos", "qos", "grptres", "description",
              "organization", "adminlevel", "coordinators", "parent"}
QOS_KEYS = {"priority", "preempt", "preemptmode", "grptres", "usagefactor", "description",
            "flags"}
_LINE = re.compile(r"^(Cluster|Parent|Account|User|QOS)\s*-\s*'([^']*)'\s*(?::(.*))?$")
_KV = re.compile(r"([A-Za-z]+)=('[^']*'|[^:]*)")


@dataclass
class Assoc:
    """A node of the association tree: an account, or a user under an account."""

    name: str
    user: bool
    shares: int = 1
    parent: Assoc | None = None
    children: list[Assoc] = field(default_factory=list)
    gpu_limit: float = math.inf  # GrpTRES=gres/gpu=N
    usage: float = 0.0  # usage_raw, decayed billing-seconds (this assoc and below)
    fs_factor: float = 0.0
    qos: tuple[str, ...] = ()
    default_qos: str = ""

    @property
    def account(self) -> str:
        """The account this association belongs to (a user's: its parent's name)."""
        return self.parent.name if self.user and self.parent else self.name


@dataclass(frozen=True)
class Qos:
    """A QOS (`slurmdb_qos_rec_t`): priority, whom it preempts, its GPU limit."""

    name: str
    priority: int = 0
    preempt: tuple[str, ...] = ()
    preempt_mode: str | None = None
    gpu_limit: float = math.inf
    usage_factor: float = 1.0


@dataclass
class Accounts:
    """The association tree (root first) and the QOS table."""

    root: Assoc
    accounts: dict[str, Assoc]
    users: dict[tuple[str, str], Assoc]  # (account, user) -> user association
    default_account: dict[str, str]
    qos: dict[str, Qos]
    given: bool = True  # False: built from the trace (no accounts file)

    def user_assoc(self, account: str, user: str) -> Assoc | None:
        """The association of `user` under `account`, or None when there is none."""
        return self.users.get((account, user))

    def add_user(self, account: str, user: str) -> Assoc:
        """An association for a user the trace names (only without an accounts file)."""
        acct = self.accounts.get(account)
        if acct is None:
            acct = Assoc(account, False, 1, self.root)
            self.root.children.append(acct)
            self.accounts[account] = acct
        a = Assoc(user, True, 1, acct)
        acct.children.append(a)
        self.users[(account, user)] = a
        return a


def default_accounts() -> Accounts:
    """No accounts file: accounts and users appear as the trace names them (Fairshare=1)."""
    root = Assoc("root", False)
    return Accounts(root, {"root": root}, {}, {}, {"normal": Qos("normal")}, given=False)


def _gpu_limit(file: Path, n: int, value: str) -> float:
    m = re.fullmatch(r"gres/gpu=(\d+)", value.strip().lower())
    if not m:
        raise InvalidParameter(f"{file}: line {n}: GrpTRES={value!r}: allowed: gres/gpu=N "
                               "(other TRES limits are not modelled)")
    return float(m.group(1))


def read_accounts(path: str | Path) -> Accounts:
    """Parse a `sacctmgr dump` file (plus QOS lines); see the module doc."""
    file = Path(path)
    try:
        text = file.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidParameter(f"accounts {str(path)!r}: cannot read: {exc}") from None
    root = Assoc("root", False)
    acc = Accounts(root, {"root": root}, {}, {}, {})
    parent = root
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        m = _LINE.match(line)
        if not m:
            raise InvalidParameter(f"{file}: line {n}: {line!r}: expected `Kind - 'name':"
                                   "Key=Value...` with Kind Cluster, Parent, Account, User, QOS")
        kind, name, rest = m.group(1), m.group(2), m.group(3) or ""
        kv = {k.lower(): v.strip("'") for k, v in _KV.findall(rest)}
        allowed = QOS_KEYS if kind == "QOS" else ASSOC_KEYS
        for k, v in kv.items():
            if k not in allowed:
                raise InvalidParameter(f"{file}: line {n}: {k}={v!r}: allowed keys for "
                                       f"{kind}: {', '.join(sorted(allowed))}")
        if kind == "Cluster":
            continue
        if kind == "Parent":
            if name not in acc.accounts:
                raise InvalidParameter(f"{file}: line {n}: Parent {name!r}: no such account "
                                       "(an Account line must come first)")
            parent = acc.accounts[name]
            continue
        if kind == "QOS":
            acc.qos[name] = _qos(file, n, name, kv)
            continue
        shares = kv.get("fairshare", "1")
        if not shares.isdigit():
            raise InvalidParameter(f"{file}: line {n}: Fairshare={shares!r}: allowed: an "
                                   "integer >= 0 (Fairshare=parent is not modelled)")
        a = Assoc(name, kind == "User", int(shares), parent,
                  gpu_limit=_gpu_limit(file, n, kv["grptres"]) if kv.get("grptres")
                  else math.inf,
                  qos=tuple(q for q in kv.get("qos", "").split(",") if q),
                  default_qos=kv.get("defaultqos", ""))
        if kind == "Account":
            if name in acc.accounts:
                raise InvalidParameter(f"{file}: line {n}: account {name!r} defined twice")
            acc.accounts[name] = a
        else:
            acc.users[(parent.name, name)] = a
            if "defaultaccount" in kv:
                acc.default_account[name] = kv["defaultaccount"]
            acc.default_account.setdefault(name, parent.name)
        parent.children.append(a)
    acc.qos.setdefault("normal", Qos("normal"))
    for q in acc.qos.values():
        for p in q.preempt:
            if p not in acc.qos:
                raise InvalidParameter(f"{file}: QOS {q.name!r}: Preempt names unknown QOS "
                                       f"{p!r}; known: {', '.join(acc.qos)}")
    return acc


def _qos(file: Path, n: int, name: str, kv: dict[str, str]) -> Qos:
    try:
        prio = int(kv.get("priority", "0"))
        factor = float(kv.get("usagefactor", "1"))
    except ValueError:
        raise InvalidParameter(f"{file}: line {n}: QOS {name!r}: Priority is an integer, "
                               "UsageFactor a number") from None
    mode = kv.get("preemptmode")
    if mode is not None:
        mode = mode.upper()
        if mode not in ("OFF", "REQUEUE", "SUSPEND"):
            raise InvalidParameter(f"{file}: line {n}: PreemptMode={mode!r}: allowed: OFF, "
                                   "REQUEUE, SUSPEND")
    if kv.get("flags"):
        raise InvalidParameter(f"{file}: line {n}: Flags={kv['flags']!r}: QOS flags are not "
                               "modelled")
    return Qos(name, prio, tuple(p for p in kv.get("preempt", "").split(",") if p), mode,
               _gpu_limit(file, n, kv["grptres"]) if kv.get("grptres") else math.inf, factor)

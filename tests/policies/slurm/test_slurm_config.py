"""slurm.conf, topology.conf and sacctmgr-dump reading; fair-share formulas by hand."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from schedlab import load_topology
from schedlab.policies.slurm import fairshare
from schedlab.policies.slurm.accounts import Assoc, read_accounts
from schedlab.policies.slurm.conf import parse_time, read_slurm_conf
from schedlab.sim.errors import InvalidParameter, InvalidTopology
from schedlab.topologies.slurm_conf import expand_hostlist


def test_hostlist_and_time_strings() -> None:
    assert expand_hostlist("gpu[01-03,07],cpu1") == ["gpu01", "gpu02", "gpu03", "gpu07", "cpu1"]
    assert [parse_time(t) for t in ("5", "2:30", "1:00:00", "1-2", "1-00:00:10")] == [
        300, 150, 3600, 93600, 86410]
    assert math.isinf(parse_time("UNLIMITED"))


def test_conf_settings(tmp_path: Path) -> None:
    f = tmp_path / "slurm.conf"
    f.write_text("ClusterName=x # comment\nSchedulerParameters=bf_interval=10,bf_window=60,"
                 "bf_resolution=5,bf_max_job_test=7,bf_continue\nPriorityType=priority/"
                 "multifactor\nPriorityWeightAge=10\nPriorityFlags=NO_FAIR_TREE\n"
                 "PartitionName=DEFAULT MaxTime=30\nPartitionName=a Nodes=n[1-2] \\\n"
                 "  PriorityTier=3 Default=YES\nPartitionName=b Nodes=ALL Priority=5\n")
    c = read_slurm_conf(f)
    assert (c.bf_interval, c.bf_window, c.bf_resolution, c.bf_max_job_test, c.bf_continue) \
        == (10, 3600, 5, 7, True)
    assert c.multifactor and c.weight_age == 10 and not c.fair_tree
    assert c.default_partition == "a" and c.partitions["a"].nodes == ("n1", "n2")
    assert c.partitions["a"].max_time == 1800 and c.partitions["a"].priority_tier == 3
    assert (c.partitions["b"].priority_tier, c.partitions["b"].job_factor) == (5, 5)


@pytest.mark.parametrize(("line", "words"), [
    ("FooBar=1", "FooBar='1'"), ("PreemptMode=CANCEL", "CANCEL and GANG"),
    ("SchedulerParameters=bf_busy_nodes", "bf_busy_nodes"),
    ("PartitionName=q MaxNodes=2", "MaxNodes='2'"),
])
def test_unsupported_fields_are_named(tmp_path: Path, line: str, words: str) -> None:
    f = tmp_path / "slurm.conf"
    f.write_text("PartitionName=p Nodes=ALL\n" + line + "\n")
    with pytest.raises(InvalidParameter, match="line 2") as e:
        read_slurm_conf(f)
    assert words in str(e.value)


def test_nodes_and_switches_as_topology(tmp_path: Path) -> None:
    f = tmp_path / "slurm.conf"
    f.write_text("NodeName=DEFAULT Sockets=2 CoresPerSocket=8 RealMemory=262144\n"
                 "NodeName=g[1-4] Gres=gpu:a100:4\nNodeName=c1 Sockets=1\n"
                 "PartitionName=p Nodes=ALL\n")
    (tmp_path / "topology.conf").write_text(
        "SwitchName=s0 Nodes=g[1-2]\nSwitchName=s1 Nodes=g[3-4],c1\nSwitchName=top "
        "Switches=s[0-1]\n")
    t = load_topology(f)
    assert [n.name for n in t.nodes] == ["g1", "g2", "g3", "g4", "c1"]
    assert t.num_gpus == 16 and dict(t.gpu_types) == {"a100": 16}
    assert t.nodes[0].num_cpus == 16 and t.nodes[0].mem_gb == 256
    assert t.level_counts()["rack"] == 2 and t.level_counts()["socket"] == 8
    (tmp_path / "topology.conf").write_text("SwitchName=s0 Nodes=g[1-4]\n")
    with pytest.raises(InvalidTopology, match="under no leaf switch"):
        load_topology(f)


ACCOUNTS = """Cluster - 'c':Fairshare=1:QOS='normal'
QOS - 'high':Priority=100:Preempt='normal'
Parent - 'root'
Account - 'a':Description='a':Organization='x':Fairshare=3
Account - 'b':Fairshare=1
Parent - 'a'
User - 'u1':DefaultAccount='a':Fairshare=1
User - 'u2':DefaultAccount='a':Fairshare=1
Parent - 'b'
User - 'u3':DefaultAccount='b':Fairshare=1:GrpTRES='gres/gpu=4'
"""


def test_accounts_dump(tmp_path: Path) -> None:
    f = tmp_path / "acc.txt"
    f.write_text(ACCOUNTS)
    acc = read_accounts(f)
    assert set(acc.qos) == {"high", "normal"} and acc.qos["high"].preempt == ("normal",)
    assert acc.default_account == {"u1": "a", "u2": "a", "u3": "b"}
    assert acc.users[("b", "u3")].gpu_limit == 4
    f.write_text(ACCOUNTS + "User - 'u4':MaxJobs=3\n")
    with pytest.raises(InvalidParameter, match="maxjobs='3'"):
        read_accounts(f)


def _tree(tmp_path: Path) -> dict[str, Assoc]:
    f = tmp_path / "acc.txt"
    f.write_text(ACCOUNTS)
    acc = read_accounts(f)
    users = {u: a for (_, u), a in acc.users.items()}
    fairshare.add_usage(users["u1"], 60)
    fairshare.add_usage(users["u2"], 20)
    fairshare.add_usage(users["u3"], 20)
    users["root"] = acc.root
    return users


def test_classic_fair_share_by_hand(tmp_path: Path) -> None:
    u = _tree(tmp_path)
    fairshare.classic(u["root"])
    # a: S=3/4, U=80/100 = Ueff (child of root); u1: S_norm = 3/4 x 1/2 = 0.375,
    # Ueff = 0.6 + (0.8 - 0.6) x 1/2 = 0.7 -> F = 2^(-0.7/0.375)
    assert u["u1"].fs_factor == pytest.approx(2 ** (-0.7 / 0.375))
    assert u["u2"].fs_factor == pytest.approx(2 ** (-(0.2 + 0.6 * 0.5) / 0.375))
    # b: S=1/4, U=0.2; u3 the only child: Ueff = 0.2 + (0.2 - 0.2) x 1 -> 2^(-0.2/0.25)
    assert u["u3"].fs_factor == pytest.approx(2 ** (-0.8))


def test_fair_tree_by_hand(tmp_path: Path) -> None:
    u = _tree(tmp_path)
    fairshare.fair_tree(u["root"])
    # LF(a) = 0.75 / 0.8 < LF(b) = 0.25 / 0.2: b's user ranks first (3/3), then in a:
    # LF(u2) = 0.5 / 0.25 > LF(u1) = 0.5 / 0.75
    assert (u["u3"].fs_factor, u["u2"].fs_factor, u["u1"].fs_factor) == (1.0, 2 / 3, 1 / 3)


def test_decay_halves_usage_over_the_half_life() -> None:
    d = fairshare.decay_factor(3600)
    assert d ** 3600 == pytest.approx(0.5, rel=1e-3)
    assert fairshare.decay_factor(0) == 1.0


def test_swf_requested_time_is_the_time_limit(tmp_path: Path) -> None:
    from schedlab.traces.readers.swf import read_swf

    f = tmp_path / "t.swf"
    f.write_text("1 0 -1 50 4 -1 -1 4 3600 -1 1 7 1 -1 1 -1 -1 -1\n"
                 "2 5 -1 50 4 -1 -1 4 -1 -1 1 7 1 -1 1 -1 -1 -1\n")
    jobs = read_swf(f).jobs
    assert [dict(j.extra)["time_limit"] for j in jobs] == ["3600", ""]

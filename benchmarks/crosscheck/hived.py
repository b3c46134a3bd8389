"""Cross-check against HiveD: its own algorithm test replayed on schedlab's `hived` cells.

microsoft/hivedscheduler `pkg/algorithm/hived_algorithm_test.go` (commit 66f26ac) drives
HiveD's algorithm on `example/config/design/hivedscheduler.yaml` (our copy:
../shared/hived-configs/design-hivedscheduler.yaml) with pods and states what each gets:
a node and leaf cells, a wait, or a preemption with its victims. This script replays the
same requests on `schedlab.policies.hived.algorithm.HivedAlgorithm` under the test's chain order
and prints HiveD's expectation beside schedlab's answer, one row a pod. Each expectation
is kept here as a constant with its source; nothing of HiveD's code is used.

Pods 8/9 (one gang of a 7-GPU and a 5-GPU pod, HiveD's group9) are one request with
members (7, 5), as a job of roles maps to. Not expressible here (rows say so): 10-15
(request validation: the policy rejects such jobs with a reason),
27 and 36-41 (Kubernetes suggested nodes).

    python benchmarks/crosscheck/hived.py          # the table
    from benchmarks.crosscheck import hived; hived.rows()   # for run_all
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))

SHARED = Path(os.environ.get("SCHEDLAB_SHARED", ROOT.parent / "shared"))
# HiveD's own config from the shared folder, else the repository's verbatim copy (a
# clone alone runs this script's test too)
CONFIG = next((p for p in (SHARED / "hived-configs" / "design-hivedscheduler.yaml",
                           ROOT / "topologies" / "data" / "samples" / "hived-configs"
                           / "design-hivedscheduler.yaml") if p.is_file()),
              SHARED / "hived-configs" / "design-hivedscheduler.yaml")
SOURCE = ("microsoft/hivedscheduler@66f26ac pkg/algorithm/hived_algorithm_test.go "
          "(expectedBindInfos, expectedPreemptInfos, pod comments)")
V, PIN, CT = "DGX2-V100", "VC1-YQW-DGX2", "CT1"
A16 = "0-15"

# pod, vc, priority, leaf type, GPUs per pod, pods, pinned, lazy, HiveD's expectation
NORMAL: list[tuple[Any, ...]] = [
    (1, "VC1", 0, V, 1, 1, "", True, "0.0.1.0 [0]"),
    (2, "VC1", 1, V, 1, 1, "", True, "0.0.1.0 [1]"),
    (3, "VC1", 2, V, 8, 1, "", True, "0.0.1.0 [8-15]"),
    (4, "VC1", -1, V, 1, 1, "", True, "0.0.5.0 [0]"),
    (5, "VC1", 1, V, 16, 2, PIN, True, f"0.0.3.0 [{A16}]; 0.0.3.1 [{A16}]"),
    (7, "VC2", 1, "DGX1-P100", 8, 3, "", True, "waits"),
    (8, "VC2", 1, "", 0, 0, "", True, "1.0.0.0 [1,3,4,7,0,2,6]; 1.0.0.2 [0-4]"),
    (16, "VC1", 2, V, 16, 2, PIN, True, "preempts pod5"),
    (18, "VC1", 1, V, 16, 2, "", True, f"0.0.3.2 [{A16}]; 0.0.3.3 [{A16}]"),
    (20, "VC1", 1, V, 16, 2, "", True, f"0.0.4.0 [{A16}]; 0.0.4.1 [{A16}]"),
    (22, "VC1", -1, V, 16, 2, "", True, f"0.0.4.2 [{A16}]; 0.0.4.3 [{A16}]"),
    (24, "VC2", 0, CT, 2, 1, "", True, "0.0.0.1 [0-1]"),
    (25, "VC2", 1, CT, 2, 1, "", False, "0.0.0.0 [0-1]"),
    (26, "VC2", 2, CT, 2, 1, "", False, "preempts pod25"),
]
STATEFUL: list[tuple[Any, ...]] = [
    (28, "VC1", 1, V, 16, 2, PIN, False, f"0.0.3.0 [{A16}]; 0.0.3.1 [{A16}]"),
    (29, "VC1", 2, V, 16, 1, PIN, True, "preempts pod28"),
    (30, "VC1", 1, V, 16, 1, PIN, True, "waits"),
    (31, "VC1", 2, V, 16, 1, PIN, True, "preempts pod28"),
    (32, "VC1", 2, V, 16, 1, PIN, True, "waits"),
    (33, "VC1", 3, V, 16, 2, PIN, True, "preempts pod28"),
    ("release", 28),
    (34, "VC1", 4, V, 16, 1, PIN, False, f"0.0.3.0 [{A16}]"),
    (35, "VC1", 5, V, 16, 2, PIN, True, "preempts pod34"),
]
MEMBERS = {8: (7, 5)}  # group9: pods of 7 and 5 leaves (a job of roles)


def _ranges(ids: list[int]) -> str:
    """Leaf addresses as HiveD's test lists them, runs of consecutive ids shortened."""
    if ids == sorted(ids):
        out, start = [], ids[0]
        for a, b in zip(ids, [*ids[1:], None], strict=True):
            if b != a + 1:
                out.append(f"{start}-{a}" if a != start else f"{a}")
                start = b
        return ",".join(out)
    return ",".join(str(i) for i in ids)


def _fresh():
    from schedlab.policies.hived.algorithm import HivedAlgorithm
    from schedlab.policies.hived.config import build_physical, resolve_vcs
    from schedlab.topologies import load_topology

    topo = load_topology(CONFIG)
    pc = build_physical(topo)
    vcs, _ = resolve_vcs(topo, pc)
    algo = HivedAlgorithm(pc, vcs)
    algo.chain_order = sorted(algo.chains, reverse=True)  # the test's sortChains
    return topo, algo


def _answer(topo, algo, row) -> str:
    from schedlab.policies.hived.algorithm import Request

    pod, vc, prio, leaf, gpus, pods, pinned, lazy, _ = row
    members = MEMBERS.get(pod, ())
    got = algo.schedule(Request(pod, vc, prio, leaf, gpus, pods, pinned, lazy, members),
                        commit=True)
    if isinstance(got, str):
        return "waits"
    if got.victims:
        return "preempts " + ", ".join(f"pod{v}" for v in got.victims)
    parts = []  # HiveD's test lists its pods largest first
    for cells in sorted(got.pods, key=len, reverse=True):
        node = topo.nodes[topo.gpu_node[cells[0].gpu]].name
        parts.append(f"{node} [{_ranges([int(c.name.rsplit('/', 1)[1]) for c in cells])}]")
    return "; ".join(parts)


def rows() -> list[dict]:
    """One row a HiveD pod: HiveD's expectation and schedlab's answer (strings)."""
    out = []
    for case, table in (("normal operations", NORMAL), ("stateful preemption", STATEFUL)):
        topo, algo = _fresh()
        for row in table:
            if row[0] == "release":
                algo.release(row[1])
                continue
            out.append({"peer": "HiveD", "case": f"{case}: pod{row[0]}",
                        "metric": "placement", "peer_value": row[-1],
                        "schedlab_value": _answer(topo, algo, row), "source": SOURCE})
    return out


def main() -> None:
    table = rows()
    width = max(len(r["case"]) for r in table)
    print(f"{'case':<{width}} | {'HiveD':<36} | schedlab")
    same = 0
    for r in table:
        ok = r["peer_value"] == r["schedlab_value"]
        same += ok
        print(f"{r['case']:<{width}} | {r['peer_value']:<36} | {r['schedlab_value']}"
              + ("" if ok else "   <- differs"))
    print(f"\n{same} of {len(table)} pods as HiveD's test expects; source: {SOURCE}")


if __name__ == "__main__":
    main()

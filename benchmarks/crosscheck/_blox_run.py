"""Run Blox's own simulator (msr-fiddle/blox) on its generated workload; log every job and round.

Not a schedlab module: it runs under Blox's venv (Python 3.11, pandas 1.5.3, grpcio and
grpcio-tools 1.59.3, protobuf 4.25.1; the gRPC stubs generated from Blox's protos with
`python -m grpc_tools.protoc` as its Makefile does) with Blox's source tree on
PYTHONPATH. Two processes, as Blox's README runs them: Blox's `SimulatorRunner`
(`simulator_simple.py`, the job generator and the cluster, served over gRPC) and its
scheduler loop (`blox_examples/blox_new_flow_multi_run.py`, `main`: admission AcceptAll,
placement `placement.JobPlacement`, scheduler Fifo or Srtf, 300 s rounds). Nothing of
Blox is changed; the driver only sets the run's configuration (the synthetic workload:
`cluster_job_log=None`, its seed 1; the load; the jobs tracked; the cluster) and logs:

- `jobs.jsonl`: every job the generator handed to Blox (id, arrival, duration, GPUs);
- `rounds.jsonl`: each round's launches (job -> GPU ids) and suspensions, written
  from a wrapper of `BloxManager.exec_jobs` that then calls Blox's own;
- Blox's own output files (`*_job_stats.json`: submit and end of each tracked job).

Usage: python _blox_run.py BLOX_SRC OUT_DIR --scheduler Fifo --load 4 --jobs 60
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

PORTS = {"sim": 50050, "rm": 50051, "nm": 50052}  # Blox's default ports (--port-offset)


def run_sim(a: argparse.Namespace) -> None:
    """Blox's SimulatorRunner, logging each job it hands out."""
    from concurrent import futures

    import grpc

    sys.argv = [sys.argv[0]]
    import simulator_simple as ss  # Blox's

    log = open(Path(a.out) / "jobs.jsonl", "w")

    class Runner(ss.SimulatorRunner):
        def _clean_sim_job(self, new_job: dict) -> dict:  # Blox's, then a log line
            out = super()._clean_sim_job(new_job)
            log.write(json.dumps({k: out[k] for k in (
                "job_id", "job_arrival_time", "job_iteration_time", "job_total_iteration",
                "job_gpu_demand")}) + "\n")
            log.flush()
            return out

    if a.one_gpu:  # every generated job asks 1 GPU (Blox's generator otherwise unchanged)
        import workload.workload as wl

        wl.get_job_gpu_demand = lambda: 1
    runner = Runner(None, [float(a.load)], (0, a.jobs - 1), [a.scheduler], ["Place"],
                    ["AcceptAll"], number_of_machines=a.machines,
                    gpus_per_machine=a.gpus_per_machine, exp_prefix="blox")
    runner.ipaddr_rm = f"localhost:{PORTS['rm'] + a.port_offset}"
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    ss.simulator_pb2_grpc.add_SimServerServicer_to_server(runner, server)
    server.add_insecure_port(f"[::]:{PORTS['sim'] + a.port_offset}")
    server.start()
    server.wait_for_termination()


def run_sched(a: argparse.Namespace) -> None:
    """Blox's scheduler loop, with `exec_jobs` logged."""
    sys.argv = [sys.argv[0], "--simulate", "--exp-prefix", "blox", "--round-duration",
                "300", "--scheduler-name", a.scheduler, "--load", str(a.load),
                "--simulator-rpc-port", str(PORTS["sim"] + a.port_offset),
                "--central-scheduler-port", str(PORTS["rm"] + a.port_offset),
                "--node-manager-port", str(PORTS["nm"] + a.port_offset)]
    sys.path.insert(0, str(Path(a.src) / "blox_examples"))
    import blox_new_flow_multi_run as loop  # Blox's
    from blox import BloxManager

    log = open(Path(a.out) / "rounds.jsonl", "w")
    original = BloxManager.exec_jobs

    def exec_jobs(self, to_launch, to_suspend, cluster_state, job_state):  # logged
        log.write(json.dumps({"t": self.time, "launch": {str(k): [int(g) for g in v]
                                                          for k, v in to_launch.items()},
                              "suspend": [int(j) for j in to_suspend]}) + "\n")
        return original(self, to_launch, to_suspend, cluster_state, job_state)

    BloxManager.exec_jobs = exec_jobs
    loop.main(loop.parse_args(argparse.ArgumentParser()))
    log.close()


def _wait_for_port(port: int, proc: subprocess.Popen, limit: float = 120.0) -> None:
    """Wait until the simulator's gRPC port accepts connections (its start may be slow)."""
    import socket

    t0 = time.time()
    while time.time() - t0 < limit and proc.poll() is None:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.5)
    raise SystemExit(f"Blox's simulator did not open port {port} (see sim.log)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src", help="Blox's source tree (with blox/deployment/grpc_stubs)")
    ap.add_argument("out", help="folder for the logs and Blox's output")
    ap.add_argument("--scheduler", default="Fifo", choices=["Fifo", "Srtf", "Las"])
    ap.add_argument("--load", type=int, default=4, help="jobs per hour")
    ap.add_argument("--jobs", type=int, default=60, help="jobs tracked (ids 0..N-1)")
    ap.add_argument("--machines", type=int, default=4)
    ap.add_argument("--gpus-per-machine", type=int, default=4)
    ap.add_argument("--one-gpu", action="store_true",
                    help="every job asks 1 GPU (Blox's get_job_gpu_demand replaced)")
    ap.add_argument("--port-offset", type=int, default=0, help="added to Blox's ports")
    ap.add_argument("--role", choices=["sim", "sched", "both"], default="both")
    a = ap.parse_args()
    out = Path(a.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    a.out = str(out)
    src = Path(a.src).resolve()
    a.src = str(src)
    here = Path(__file__).resolve().parent  # schedlab's blox.py would shadow Blox's package
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != here]
    if a.role == "sim":
        os.chdir(out)
        run_sim(a)
        return
    if a.role == "sched":
        os.chdir(out)
        run_sched(a)
        return
    env = {**os.environ, "PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION": "python",
           "PYTHONPATH": os.pathsep.join([str(src), str(src / "blox/deployment/grpc_stubs")])}
    base = [sys.executable, __file__, str(src), str(out), "--scheduler", a.scheduler,
            "--load", str(a.load), "--jobs", str(a.jobs), "--machines", str(a.machines),
            "--gpus-per-machine", str(a.gpus_per_machine),
            "--port-offset", str(a.port_offset)] + (["--one-gpu"] if a.one_gpu else [])
    t0 = time.time()
    with open(out / "sim.log", "w") as slog, open(out / "sched.log", "w") as dlog:
        sim = subprocess.Popen(base + ["--role", "sim"], env=env, stdout=slog, stderr=slog)
        try:
            _wait_for_port(PORTS["sim"] + a.port_offset, sim)
            rc = subprocess.call(base + ["--role", "sched"], env=env, stdout=dlog,
                                 stderr=dlog)
        finally:
            sim.terminate()
            sim.wait()
    print(f"blox {a.scheduler}: exit {rc}, {time.time() - t0:.0f} s, output in {out}")
    sys.exit(rc)


if __name__ == "__main__":
    main()

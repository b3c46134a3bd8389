"""The application layer: the `schedlab` command line, sweeps, figures and metric checks.

Nothing in the simulation core imports this package; it drives the core through its
public API (`schedlab.sim.engine.Simulation`, `schedlab.traces.load_trace`,
`schedlab.topologies.load_topology`).
Modules: `cli` (the click group and `run`, `policies`, `topology`), `cli_trace`
(`trace inspect`, `trace convert`), `cli_research` (`sweep`, `plot`, `check`), `common`
(error exit, policy folder names), `sweep` (the public face of `sweep_file`,
`sweep_values`, `sweep_run` and `sweep_summary`), `plots` (with `plot_runs`), `check`,
and `rl`, the Gymnasium environment `schedlab/Cluster-v0` (optional extra `rl`).
"""

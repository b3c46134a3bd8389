"""Job performance models: throughput and goodput of a job for where and how it runs."""

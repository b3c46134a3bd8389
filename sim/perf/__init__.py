"""Job performance models: how fast a job trains on a placement."""

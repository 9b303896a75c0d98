"""The MLflow run of a release and the `pseo-das audit` checks."""

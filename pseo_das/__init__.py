"""pseo-das: differentially private PSEO releases."""

"""Employment flows (the data product): true and noisy flows, the correction, pseof."""

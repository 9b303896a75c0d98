"""Earnings: true and noisy histograms, percentiles, the pseoe/pseoh tables."""

"""Synthetic microdata by sequential CART models (Barrientos et al. 2017, section 2.2).
No formal privacy guarantee: the synthetic files need disclosure review before release."""

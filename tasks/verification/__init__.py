"""The verification server of Barrientos et al. (2017): differentially private checks of
regression results that an analyst found on synthetic data, answered from the confidential
data by subsample-and-aggregate."""

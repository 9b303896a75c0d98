"""Recasting noisy CIP-2010 counts into CIP-2020 codes (technical appendix B)."""

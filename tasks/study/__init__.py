"""The accuracy study and its simulation noise (never applied to confidential data)."""

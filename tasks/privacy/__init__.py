"""The mechanism layer (the only code that draws release noise), the ledger and the privacy store."""

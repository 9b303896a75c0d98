"""The release plan and the store readers: which stored measurements answer a release's
questions, which must be measured, and the noisy tables read back from the privacy store.
Above the products, below publication."""

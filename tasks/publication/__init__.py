"""Release folders: staging, documents, manifest, atomic publication."""

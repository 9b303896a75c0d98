"""How records and cells are coded, shared by the products and publication: employment
destinations, earnings bins, the official codes and IPEDS counts of the public files."""

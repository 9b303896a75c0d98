"""Reading and validating microdata and public reference files; the cell frame."""

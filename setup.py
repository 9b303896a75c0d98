"""The package list, computed: every package under the folders that install inside pseo_das.

The owner's top-level folders (flows/, tasks/, schemas/, reports/) install as pseo_das.flows,
pseo_das.tasks, ...; setuptools' own discovery cannot add that prefix, so this file adds it,
and a new sub-package (any folder with an __init__.py) ships without anyone listing it.
Everything else about the distribution is in pyproject.toml.
"""
from setuptools import find_packages, setup

PACKAGE_DIR = {"pseo_das": "pseo_das", "pseo_das.flows": "flows", "pseo_das.tasks": "tasks",
               "pseo_das.schemas": "schemas", "pseo_das.reports": "reports"}

setup(package_dir=PACKAGE_DIR,
      packages=[f"{package}.{sub}" if sub else package
                for package, folder in PACKAGE_DIR.items()
                for sub in ["", *find_packages(folder)]])

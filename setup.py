"""Package list for setuptools (everything else is in pyproject.toml).

The shipped designs are data folders under ``designs/``; setuptools wants every folder it
installs declared as a package, so each one is listed here as ``hwtp.designs.<...>``.
"""

from pathlib import Path

from setuptools import find_packages, setup

ROOT = Path(__file__).parent
DESIGNS = ROOT / "designs"
design_packages = sorted(
    "hwtp.designs." + ".".join(p.relative_to(DESIGNS).parts)
    for p in DESIGNS.rglob("*")
    if p.is_dir() and "__pycache__" not in p.parts
)

DESIGN_FILES = ["*.yaml", "*.md", "*.v", "*.sv", "*.vh", "*.svh"]

setup(
    packages=[
        # every package under hwtp/ (a folder with __init__.py), found so that none is forgotten
        *find_packages(where=str(ROOT), include=["hwtp", "hwtp.*"]),
        # mutators/ and sim/ install as hwtp.mutators and hwtp.sim, their subpackages with them
        *(f"hwtp.{top}" + (f".{sub}" if sub else "") for top in ("mutators", "sim")
          for sub in ["", *find_packages(where=str(ROOT / top))]),
        "hwtp.designs",
        *design_packages,
    ],
    package_data={
        "hwtp": ["py.typed"],
        "hwtp.policy.templates": ["*.md"],
        "hwtp.report": ["templates/*.j2"],
        **{package: DESIGN_FILES for package in design_packages},
    },
)

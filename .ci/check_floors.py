"""Exit 1 unless each named direct dependency is installed at the floor the package declares.

Run after a lowest-version install (``.ci/lowest``): a floor that the resolver could not reach
(another package requiring more) is a floor the package claims but never tests. The floors are
read from the installed packages' metadata (the method's and the lab's ``pyproject.toml``
requirements, extras included).
"""

import sys
from importlib.metadata import requires, version

from packaging.requirements import Requirement
from packaging.version import Version

floors = {}
declared = [*(requires("torch-uncertainty-signorm") or []), *(requires("signorm-lab") or [])]
for requirement in map(Requirement, declared):
    for spec in requirement.specifier:
        if spec.operator in (">=", "==", "~="):
            floors[requirement.name] = Version(spec.version.replace(".*", ""))
failed = []
for name in sys.argv[1:]:
    installed, floor = Version(version(name)), floors[name]
    at_floor = installed.release[: len(floor.release)] == floor.release
    print(
        f"{name:20} floor {floor!s:10} installed {installed!s:12} "
        f"{'ok' if at_floor else 'ABOVE THE FLOOR'}"
    )
    if not at_floor:
        failed.append(name)
if failed:
    sys.exit(f"not installed at their floors: {', '.join(failed)}")

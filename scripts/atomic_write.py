"""Output files of the Python scripts, written the way octoplan and octorun write theirs.

write_atomic(path, text, tool) writes the whole text to a temporary file in the target's folder and
renames it over the target, so an interrupted or failed run never leaves a half-written file and an
existing file stays intact until the new one is complete. It refuses (exit status 4, octoplan's code
for an output it cannot write; the message names the tool and the path) a target that exists but is
not a regular file (a folder, a device, a pipe: a rename would replace it) and a target whose folder
does not exist.

The scripts import it from their own folder (scripts/) with bytecode writing off, so that running
a script leaves no __pycache__ in the checkout.
"""

import os
import sys
import tempfile


def _refuse(tool, message):
    print(f"{tool}: error: {message}", file=sys.stderr)
    sys.exit(4)


def check_target(path, tool):
    """Refuses a target write_atomic would refuse; a script calls it before its long work."""
    target = os.path.abspath(path)
    folder = os.path.dirname(target)
    if os.path.lexists(target) and not os.path.isfile(target):
        _refuse(tool, f"{path}: exists and is not a regular file (not replaced)")
    if not os.path.isdir(folder):
        _refuse(tool, f"{path}: folder {folder} does not exist")


def write_atomic(path, text, tool):
    check_target(path, tool)
    target = os.path.abspath(path)
    # A symbolic link to a regular file is written through (the link stays, its target is replaced).
    target = os.path.realpath(target)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(target), prefix="." + os.path.basename(target) + ".",
                               suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except BaseException:
        os.unlink(tmp)
        raise

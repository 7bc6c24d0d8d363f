"""Output files of the Python scripts, written the way octoplan and octorun write theirs.

write_atomic(path, text, tool) writes the whole text to a temporary file in the target's folder and
renames it over the target, so an interrupted or failed run never leaves a half-written file and an
existing file stays intact until the new one is complete. It refuses (exit status 4, octoplan's code
for an output it cannot write; the message names the tool and the path) a target that exists but is
not a regular file (a folder, a device, a pipe: a rename would replace it) and a target whose folder
does not exist.

check_not_input(path, inputs, tool) refuses (exit 4) an output that is one of the inputs, also
through a symbolic link or another spelling of the path: writing it would replace what was read.
read_input(path, tool) reads a text input as octoplan does: a FIFO nobody writes to reads as empty
instead of waiting for ever, and what cannot be read or decoded is an error naming the path (exit 3);
read_json(path, tool, what) parses it as JSON the same way.

The scripts import it from their own folder (scripts/) with bytecode writing off, so that running
a script leaves no __pycache__ in the checkout.
"""

import json
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


def check_not_input(path, inputs, tool):
    """Refuses an output that names one of `inputs` (None entries are skipped)."""
    target = os.path.realpath(path)
    for given in inputs:
        if given and os.path.exists(given) and os.path.realpath(given) == target:
            _refuse(tool, f"{path}: is an input of this command ({given}); writing it would replace what was read")


def read_input(path, tool):
    """The text of an input file; exit 3 with the path where it cannot be read (a folder, a missing
    file, bytes that are not UTF-8). A FIFO is opened without waiting for a writer, so one that
    nobody writes to reads as empty rather than hanging."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        try:
            os.set_blocking(fd, True)  # a writer that is there streams as usual
            with os.fdopen(fd, "rb", closefd=False) as f:
                data = f.read()
        finally:
            os.close(fd)
        return data.decode("utf-8")
    except IsADirectoryError:
        message = "is a folder (expected a file)"
    except OSError as e:
        message = f"cannot read: {e.strerror}"
    except UnicodeDecodeError as e:
        message = f"not UTF-8 text (byte {e.start})"
    print(f"{tool}: error: {path}: {message}", file=sys.stderr)
    sys.exit(3)


def read_json(path, tool, what):
    """The JSON value of an input file (read_input), or exit 3 naming the path and `what` it should be."""
    text = read_input(path, tool)
    try:
        return json.loads(text)
    except ValueError as e:
        print(f"{tool}: error: {path}: not JSON ({e}; expected {what})", file=sys.stderr)
        sys.exit(3)


def _mode_for(target):
    """A replaced file keeps its permission bits; a new one gets 0666 less the umask (as creat(2))."""
    try:
        return os.stat(target).st_mode & 0o7777
    except OSError:
        mask = os.umask(0o022)
        os.umask(mask)
        return 0o666 & ~mask


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
        os.chmod(tmp, _mode_for(target))
        os.replace(tmp, target)
    except BaseException:
        os.unlink(tmp)
        raise

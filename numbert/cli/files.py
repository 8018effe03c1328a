"""Texts in, one per line, read lazily; results out, into a file that appears only when the run succeeds.

Input is streamed (memory stays flat on a file of any length); output goes to a temporary file
renamed to OUT at the end, so a failed run never leaves a half-written OUT.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from .common import Failure

SIGNALS: list[int] = []  # the signals this command has caught (numbert.cli.terminate notes each)


class Terminated(BaseException):
    """A caught signal, raised where the command is (SIGINT as KeyboardInterrupt), so the temporary output
    file is removed on the way out."""


# --- input ----------------------------------------------------------------------------------------


def input_lines(args: argparse.Namespace) -> Iterator[str]:
    """The input texts: the TEXT arguments, else one per line of --file or stdin ('-'), read lazily.

    Invalid UTF-8 is a Failure naming the line. A missing file fails here, before any model loads.
    """
    if args.text and args.text != ["-"]:
        if args.file is not None:
            raise Failure("give texts as arguments or --file, not both")
        return iter(args.text)
    if args.file is None or args.file == "-":
        if sys.stdin.isatty():
            print(
                f"numbert {args.command}: reading texts from stdin, one per line (Ctrl-D to end; "
                f"see numbert {args.command} --help)",
                file=sys.stderr,
            )
        return decoded_lines(sys.stdin.buffer, "stdin")
    try:
        f = open(args.file, "rb")
    except OSError as e:
        raise Failure(f"cannot read {args.file}: {e.strerror}") from None
    return decoded_lines(f, args.file)


def has_lines(path: str, n: int) -> bool:
    """True if the file at `path` holds at least `n` lines: read in blocks only until the n-th line ends."""
    found, last = 0, b"\n"
    with open(path, "rb") as f:
        while found < n and (block := f.read(1 << 20)):
            found, last = found + block.count(b"\n"), block[-1:]
    return found + (last != b"\n") >= n  # a last line without a line ending counts too


def decoded_lines(f: IO[bytes], name: str) -> Iterator[str]:
    """Each line of a binary file as str without its line ending (a UTF-8 BOM on line 1 is dropped)."""
    with f:
        for number, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise Failure(
                    f"{name}: line {number} is not valid UTF-8 (byte {raw[e.start]:#04x} at column {e.start + 1})"
                ) from None
            if number == 1:
                line = line.removeprefix("\ufeff")
            yield line.removesuffix("\n").removesuffix("\r")


def chunked(lines: Iterator[str], size: int) -> Iterator[list[str]]:
    chunk = []
    for line in lines:
        chunk.append(line)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def count_lines(args: argparse.Namespace) -> int | None:
    """The number of input lines when it is cheap to know (arguments or a regular file), for the bar."""
    if args.text and args.text != ["-"]:
        return len(args.text)
    if args.file in (None, "-") or not os.path.isfile(args.file):
        return None
    with open(args.file, "rb") as f:
        count, last = 0, b"\n"
        for block in iter(lambda: f.read(1 << 20), b""):
            count, last = count + block.count(b"\n"), block[-1:]
    return count + (last != b"\n")


@contextlib.contextmanager
def progress_bar(args: argparse.Namespace) -> Iterator[Any]:
    """A tqdm bar over input lines on stderr, only when stderr is a terminal; each batch embedded advances it."""
    from tqdm.auto import tqdm

    show = sys.stderr.isatty()
    with tqdm(total=count_lines(args) if show else None, unit="line", disable=not show, file=sys.stderr) as bar:
        yield bar


# --- output ---------------------------------------------------------------------------------------


@contextlib.contextmanager
def output_file(path: str | None, format: str) -> Iterator[IO[bytes]]:
    """A binary file to write into, which becomes `path` only if the block succeeds.

    With a path, a temporary file in the same directory is renamed over it at the end: a failed run
    leaves nothing at OUT, and nothing beside it either (the file has no name until then, where Linux
    allows: `unnamed_file`). To stdout or a special file (/dev/null, a pipe), .npy/.npz are staged in a
    temporary file (their header needs the row count) and copied at the end; JSON lines stream.
    """
    target = None if path is None or path == "-" else Path(path)
    if target is not None and target.is_dir():
        raise Failure(f"cannot write {path}: it is a directory")
    if target is None or (target.exists() and not target.is_file()):
        try:
            sink = sys.stdout.buffer if target is None else open(target, "wb")
        except OSError as e:
            raise Failure(f"cannot write {path}: {e.strerror}") from None
        with contextlib.ExitStack() as stack:
            if target is not None:
                stack.enter_context(sink)
            if format in ("jsonl", "text", "features"):  # no header: streamed as written
                yield sink
            else:
                with tempfile.TemporaryFile() as tmp:
                    yield tmp
                    tmp.seek(0)
                    shutil.copyfileobj(tmp, sink, 1 << 20)
            sink.flush()
        return
    fd, tmp_name = unnamed_file(target.parent), None  # tmp_name: the temporary file's name, once it has one
    if fd is None:
        try:
            fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
        except OSError as e:
            raise Failure(f"cannot write {path}: {e.strerror}") from None
    try:
        with os.fdopen(fd, "w+b") as tmp:
            yield tmp
            if SIGNALS:  # a signal whose exception Python swallowed (raised inside a finalizer): OUT stays as it was
                raise Terminated(SIGNALS[0])
            if tmp_name is None:  # the unnamed file gets a name beside OUT only now, when it is whole
                name = f".{target.name}.{secrets.token_hex(4)}.tmp"
                name_unnamed_file(tmp.fileno(), target.parent, name)
                tmp_name = str(target.parent / name)
            else:
                os.chmod(tmp_name, 0o666 & ~current_umask())  # mkstemp makes 0600; give OUT the usual permissions
        os.replace(tmp_name, target)
    except BaseException:
        if tmp_name is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp_name)
        raise


def unnamed_file(directory: Path) -> int | None:
    """A new file in `directory` without a name (Linux's O_TMPFILE), which a process killed even by SIGKILL
    leaves nowhere, linkable later through /proc/self/fd; None where the system or the file system has
    no such files (then output_file stages a hidden named file, removed on any exception or signal numbert
    catches: SIGTERM, SIGHUP, SIGINT)."""
    try:
        fd = os.open(directory, os.O_TMPFILE | os.O_RDWR, 0o666)  # the umask applies, as for any new file
    except (AttributeError, OSError):  # no O_TMPFILE here, or not on this file system
        return None
    if not os.path.exists(f"/proc/self/fd/{fd}"):  # nothing to link it through
        os.close(fd)
        return None
    return fd


def name_unnamed_file(fd: int, directory: Path, name: str) -> None:
    """Link an `unnamed_file` into `directory` as `name`, through /proc/self/fd; os.link follows that link
    (linkat's AT_SYMLINK_FOLLOW) only when given a directory's descriptor, so it is given one."""
    directory_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.link(f"/proc/self/fd/{fd}", name, dst_dir_fd=directory_fd)
    finally:
        os.close(directory_fd)


def current_umask() -> int:
    """The process's umask (reading it means setting it: set back at once)."""
    umask = os.umask(0)
    os.umask(umask)
    return umask

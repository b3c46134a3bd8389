"""Writing files and whole folders so that a reader never sees a partial result.

Two guarantees, whatever kills the writer (an exception, Ctrl-C, SIGKILL, a full disk):

- `atomic_write` / `atomic_text`: a file is written to a temporary file in the same
  folder, flushed to disk (fsync) and renamed over its final name, so the final name
  holds the old complete file or the new complete file.
- `write_folder`: every file of a folder is written into a fresh folder inside a hidden
  sibling, `.NAME.tmp-<hex>/NAME/`, which is then swapped in for the final folder, so a
  reader sees the old complete folder or the new complete one, never a mix of both. On
  Linux the swap is one `renameat2(RENAME_EXCHANGE)` call and the final name never goes
  missing; elsewhere (or on a file system without it) the old folder is renamed aside
  (into the hidden sibling) and the new one renamed in: the final name is missing only
  between those two renames. The new folder sits one level down in the hidden sibling
  so that a reader globbing `*/summary.json` never takes a folder being written for a
  finished one.

Temporary names are hidden and recognisable: `.NAME.tmp-<12 hex digits>`. A writer
holds an advisory lock (`flock`) on its temporary file or folder; writing NAME again
removes the leftovers of earlier killed writes of NAME (our own names only, unlocked and
older than `STRAY_AGE_SECONDS`), including those of the former `tempfile.mkstemp`
naming (`.NAME.` and 8 characters).

Modes: files are created with mode 0o666 and folders with 0o777, and the kernel applies
the process's umask (and a default ACL, when the folder has one), exactly as a plain
`open()` or `mkdir` would; nothing is chmod-ed afterwards.

This module imports nothing of schedlab, so any layer may use it.
"""

from __future__ import annotations

import errno
import json
import math
import os
import re
import secrets
import shutil
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = [
    "STRAY_AGE_SECONDS",
    "FolderNotWritable",
    "atomic_text",
    "atomic_write",
    "ensure_writable_dir",
    "json_text",
    "null_non_finite",
    "remove_strays",
    "text_writer",
    "write_folder",
]

Writer = Callable[[str], object]
"""Writes one file at the path it is given (a temporary name; the file may not exist)."""

STRAY_AGE_SECONDS = 5.0
"""A leftover temporary file or folder is removed only when it is at least this old.

The lock already protects a write in progress; the age covers the moment between
creating a temporary name and locking it, and file systems without `flock`.
"""

_TMP = ".tmp-"
_TOKEN_BYTES = 6  # 12 hex digits
_LEGACY = r"[a-z0-9_]{8}"  # tempfile.mkstemp's random part, the naming of earlier versions


class FolderNotWritable(OSError):
    """A folder that cannot be created, or in which no file can be created."""

    def __init__(self, path: str | os.PathLike[str], reason: str, code: int = 0) -> None:
        super().__init__(code, reason)
        self.path = Path(path)
        self.reason = reason

    def __str__(self) -> str:
        return f"cannot write to {str(self.path)!r}: {self.reason}"

    def __reduce__(self) -> tuple[type[FolderNotWritable], tuple[str, str, int]]:
        return (FolderNotWritable, (str(self.path), self.reason, self.errno or 0))


# --------------------------------------------------------------------------- one file


def atomic_write(path: str | os.PathLike[str], write: Writer) -> Path:
    """Write one file atomically: `write(tmp)`, fsync, then rename over `path`.

    The temporary file is created (mode 0o666 under the umask) in the folder of `path`
    before `write` runs, so `write` may open it for writing or replace it. The folder
    must exist.

    Args:
        path: The final file name.
        write: Called once with the temporary file's path.

    Returns:
        The final path.

    Raises:
        Exception: Whatever `write` raises; the temporary file is removed first and the
            file under `path` (if any) is left as it was.
    """
    final = Path(path)
    remove_strays(final.parent, final.name)
    tmp, fd = _new_temp_file(final)
    try:
        _lock(fd)
        write(str(tmp))
        _fsync_file(tmp)
        os.replace(tmp, final)
    except BaseException:
        _unlink(tmp)
        raise
    finally:
        os.close(fd)
    _fsync_dir(final.parent)
    return final


def atomic_text(path: str | os.PathLike[str], text: str) -> Path:
    """Write a text file atomically (UTF-8, one trailing newline added).

    Args:
        path: The final file name.
        text: The content, without its final newline.

    Returns:
        The final path.
    """
    return atomic_write(path, text_writer(text + "\n"))


def text_writer(text: str) -> Writer:
    """A writer of `text` (UTF-8, as given) for `atomic_write` and `write_folder`.

    Args:
        text: The exact content of the file.

    Returns:
        A function that writes `text` to the path it is given.
    """

    def write(path: str) -> None:
        with open(path, "w", encoding="utf-8", newline="") as f:
            f.write(text)

    return write


def null_non_finite(value: Any) -> Any:
    """`value` with every NaN or infinite float (numpy's too) replaced by None, recursively.

    JSON has no NaN: a bare `NaN` is invalid for jq, JavaScript and strict parsers, so
    every JSON file schedlab writes holds null there instead (docs/contract.md#sec-5).
    Mappings and sequences are copied; other values are returned as they are.
    """
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {k: null_non_finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [null_non_finite(v) for v in value]
    if type(value).__module__ == "numpy" and hasattr(value, "dtype") \
            and getattr(value.dtype, "kind", "") == "f" and getattr(value, "ndim", 1) == 0:
        f = float(value)
        return f if math.isfinite(f) else None
    return value


def json_text(value: Any, *, indent: int | None = 2, sort_keys: bool = False,
              default: Callable[[Any], Any] | None = None) -> str:
    """Strict JSON text of `value`: NaN and infinities as null, never bare (`allow_nan=False`)."""
    return json.dumps(null_non_finite(value), indent=indent, sort_keys=sort_keys,
                      default=default, allow_nan=False)


# --------------------------------------------------------------------------- a folder


def write_folder(path: str | os.PathLike[str], files: Mapping[str, Writer], *,
                 replaces: Callable[[Path], bool] | None = None) -> Path:
    """Write a whole folder: every file into a fresh folder, then swap it in.

    The files are written in the order given, each flushed to disk, into
    `.NAME.tmp-<hex>/NAME` (folders of mode 0o777 under the umask), which then takes the
    final name; the old folder, when there was one, is removed with everything in it
    (files it had that `files` does not name are gone too: the folder is replaced, not
    merged).

    Args:
        path: The final folder; its parent is created when missing. When it is a symbolic
            link, the folder it points to is replaced and the link kept.
        files: File name (a plain name, no folder part) -> writer of that file.
        replaces: A test an existing non-empty folder must pass to be replaced (e.g. it
            holds a `summary.json`), so a mistyped path never deletes unrelated files;
            None replaces any folder.

    Returns:
        `path`, as given.

    Raises:
        ValueError: A file name is not a plain name.
        FileExistsError: `path` exists and is not a folder, or is a non-empty folder
            that fails `replaces`.
        Exception: Whatever a writer raises; the temporary folder is removed first and the
            old folder is left as it was.
    """
    given = Path(path)
    final = Path(os.path.abspath(given))  # a real last name, also for "." or "x/.."
    if final.is_symlink():  # keep the user's link: replace the folder it points to
        final = final.resolve()
    for name in files:
        if not name or name in (".", "..") or os.sep in name or (
                os.altsep is not None and os.altsep in name):
            raise ValueError(f"write_folder: {name!r} is not a plain file name")
    parent = final.parent
    parent.mkdir(parents=True, exist_ok=True)
    remove_strays(parent, final.name)
    if final.exists() and not final.is_dir():
        raise FileExistsError(errno.EEXIST, "exists and is not a folder", str(final))
    if replaces is not None and final.is_dir() and any(final.iterdir()) \
            and not replaces(final):
        raise FileExistsError(
            errno.EEXIST, "is a folder of other files; refusing to replace it (choose "
            "a new folder, or an earlier result folder)", str(final))
    wrapper = _new_temp_dir(final)
    fd = _open_dir(wrapper)
    try:
        if fd is not None:
            _lock(fd)
        new = wrapper / final.name
        os.mkdir(new, 0o777)
        for name, write in files.items():
            target = new / name
            write(str(target))
            _fsync_file(target)
        _fsync_dir(new)
        _fsync_dir(wrapper)
        _swap_in(new, final, wrapper / f"{final.name}.old")
        _fsync_dir(parent)
    finally:
        # after the swap it holds the old folder; after a failure, the new one
        shutil.rmtree(wrapper, ignore_errors=True)
        if fd is not None:
            os.close(fd)
    return given


def _swap_in(new: Path, final: Path, aside: Path) -> None:
    """Give `new` the name `final`; a folder already there ends up under `new` or `aside`."""
    for _ in range(10):  # another writer of `final` may move it between our steps
        if not final.exists():
            try:
                os.rename(new, final)
                return
            except FileExistsError:
                continue
            except OSError as e:
                if e.errno in (errno.ENOTEMPTY, errno.EEXIST):
                    continue
                raise
        if _exchange(new, final):
            return
        moved = False
        try:
            os.rename(final, aside)
            moved = True
            os.rename(new, final)
        except FileNotFoundError:
            if moved:
                _restore(aside, final)
                raise
            continue  # another writer moved `final` first
        except BaseException:
            if moved:
                _restore(aside, final)
            raise
        return
    raise FileExistsError(errno.EEXIST, "other writers keep replacing it", str(final))


def _restore(aside: Path, final: Path) -> None:
    """Put the old folder back under its name after a failed swap (best effort)."""
    try:
        os.rename(aside, final)
    except OSError:
        pass  # a newer folder took the name meanwhile: the old one is a stray now


_renameat2: Callable[..., int] | None = None
_renameat2_checked = False


def _exchange(a: Path, b: Path) -> bool:
    """Swap two existing paths in one system call; False when the system cannot."""
    global _renameat2, _renameat2_checked
    if not sys.platform.startswith("linux"):
        return False
    if not _renameat2_checked:
        _renameat2_checked = True
        try:
            import ctypes

            fn = ctypes.CDLL(None, use_errno=True).renameat2
            fn.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                           ctypes.c_uint)
            fn.restype = ctypes.c_int
            _renameat2 = fn
        except (OSError, AttributeError):  # no libc symbol (old glibc, musl, ...)
            _renameat2 = None
    if _renameat2 is None:
        return False
    import ctypes

    at_fdcwd, rename_exchange = -100, 2
    if _renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOENT):
        return False  # kernel or file system without it, or `b` vanished: rename instead
    raise OSError(code, os.strerror(code), str(b))


# --------------------------------------------------------------------------- checks


def ensure_writable_dir(path: str | os.PathLike[str]) -> Path:
    """Create folder `path` (and its parents) if needed and check a file can be made in it.

    Meant to run before long work whose results go there, so that a bad output folder
    fails at once. It creates and removes one hidden probe file.

    Args:
        path: The folder.

    Returns:
        The folder.

    Raises:
        FolderNotWritable: It cannot be created or written in; `str()` names the path and
            the reason (a file where a folder should be, permission denied, read-only
            file system, ...).
    """
    folder = Path(path)
    existing = folder
    while not os.path.lexists(existing) and existing.parent != existing:
        existing = existing.parent
    if existing.exists() and not existing.is_dir():
        what = "it is" if existing == folder else f"{str(existing)!r} is"
        raise FolderNotWritable(folder, f"{what} a file, not a folder", errno.ENOTDIR)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tmp, fd = _new_temp_file(folder / "write-check")
        os.close(fd)
        _unlink(tmp)
    except OSError as e:
        raise FolderNotWritable(folder, e.strerror or str(e), e.errno or 0) from e
    return folder


# --------------------------------------------------------------------------- leftovers


def remove_strays(folder: str | os.PathLike[str], name: str, *,
                  min_age: float = STRAY_AGE_SECONDS) -> list[Path]:
    """Remove the leftovers of earlier killed writes of `name` in `folder`.

    Only our own temporary names of `name` count (`.NAME.tmp-<hex>` and the former
    `.NAME.XXXXXXXX`); an entry another writer still locks, or younger than `min_age`
    seconds, is kept.

    Args:
        folder: The folder that holds (or will hold) `name`.
        name: The final file or folder name.
        min_age: Keep entries modified less than this many seconds ago.

    Returns:
        The paths removed.
    """
    pattern = re.compile(rf"\.{re.escape(name)}(?:{re.escape(_TMP)}[0-9a-f]"
                         rf"{{{2 * _TOKEN_BYTES}}}|\.{_LEGACY})")
    removed: list[Path] = []
    now = time.time()
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    start = f".{name}."
    for entry in entries:
        if not entry.name.startswith(start) or not pattern.fullmatch(entry.name):
            continue
        path = Path(entry.path)
        try:
            if now - entry.stat(follow_symlinks=False).st_mtime < min_age:
                continue
            is_dir = entry.is_dir(follow_symlinks=False)
        except OSError:
            continue
        with _unlocked(path) as free:
            if not free:
                continue
            if is_dir:
                shutil.rmtree(path, ignore_errors=True)
            else:
                _unlink(path)
        if not os.path.lexists(path):
            removed.append(path)
    return removed


@contextmanager
def _unlocked(path: Path) -> Iterator[bool]:
    """Hold the lock of `path` while the block runs; yield False when someone else has it."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        yield False  # cannot tell whether it is in use: leave it alone
        return
    try:
        yield _lock(fd)
    finally:
        os.close(fd)


# --------------------------------------------------------------------------- helpers


def _lock(fd: int) -> bool:
    """Take an exclusive advisory lock without waiting; False when another process has it.

    True too on a system or file system without `flock` (the age rule protects then).
    """
    if sys.platform == "win32":  # pragma: no cover - no flock
        return True
    import fcntl

    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    except OSError:
        return True
    return True


def _unused_name(final: Path, kind: str) -> Path:
    return final.with_name(f".{final.name}{kind}{secrets.token_hex(_TOKEN_BYTES)}")


def _new_temp_file(final: Path) -> tuple[Path, int]:
    """A new hidden file next to `final`, created 0o666 under the umask; (path, fd)."""
    for _ in range(100):
        tmp = _unused_name(final, _TMP)
        try:
            return tmp, os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no unused temporary name", str(final))


def _new_temp_dir(final: Path) -> Path:
    """A new hidden folder next to `final`, created 0o777 under the umask."""
    for _ in range(100):
        tmp = _unused_name(final, _TMP)
        try:
            os.mkdir(tmp, 0o777)
            return tmp
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no unused temporary name", str(final))


def _open_dir(path: Path) -> int | None:
    try:
        return os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - a system that cannot open folders (Windows)
        return None


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(path: Path) -> None:
    """Make renames in `path` durable (best effort: not every system can fsync a folder)."""
    fd = _open_dir(path)
    if fd is None:  # pragma: no cover
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def _unlink(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass

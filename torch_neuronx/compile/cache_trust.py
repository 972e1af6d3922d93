"""What the compile cache may read and load: files only you (or your team's key) can have written.

A cache entry holds a pickled compiled graph and the kernel libraries it loads; unpickling
it or loading a library runs code. A checksum stored beside the data proves nothing about
who wrote it: anyone who can write the directory can write a matching checksum. So the cache
reads a file only when it can tell that nobody but its user (or a key holder) wrote it:

- A private cache (the default) trusts ownership and permissions. The directory, every
  directory the cache creates under it and every entry must be owned by the effective user and
  not writable by group or others; every directory above it must be owned by the user or root
  and not writable by others unless sticky (/tmp), so nobody else can swap it out from above.
  Directories the cache creates are made 0700 and files 0600, whatever the umask.
- A shared team cache (TORCH_NEURONX_NEFF_CACHE_KEY_FILE) trusts no file ownership: every entry
  carries an HMAC-SHA256 under the team's secret key, verified before a byte of it is
  deserialized. The key file must be readable by its owner and group only, in directories that
  no one outside can write to (or sticky ones).

Inductor's own kernel directory (TORCHINDUCTOR_CACHE_DIR) is held to the private rule: Inductor
loads any kernel library or wrapper module it finds there.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import stat
import time

MIN_KEY_BYTES = 32  # a 256-bit key for HMAC-SHA256


class Untrusted(Exception):
    """A file or directory the cache must not read, with the reason (`str(e)`)."""

    def __init__(self, path: str, reason: str):
        super().__init__(f"{path} {reason}")
        self.path = path
        self.reason = reason


def _user(uid: int) -> str:
    try:
        import pwd
        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except (KeyError, ImportError):
        return f"uid {uid}"


def _writable_by_others(st: os.stat_result) -> str | None:
    if st.st_mode & stat.S_IWOTH:
        return "writable by all users"
    if st.st_mode & stat.S_IWGRP:
        return "writable by its group"
    return None


def check_owned_by_me(path: str, st: os.stat_result) -> None:
    me = os.geteuid()
    if st.st_uid != me:
        raise Untrusted(path, f"is owned by {_user(st.st_uid)}, not by you ({_user(me)})")
    writable = _writable_by_others(st)
    if writable:
        raise Untrusted(path, f"is {writable} (mode {stat.S_IMODE(st.st_mode):04o})")


def _check_ancestors(path: str, group_may_write: bool) -> None:
    """Nobody but the user, root (and, if allowed, the group) can rename or replace `path` from above."""
    me = os.geteuid()
    parent = os.path.dirname(path)
    while True:
        st = os.stat(parent)
        sticky = bool(st.st_mode & stat.S_ISVTX)  # /tmp: others cannot rename what they do not own
        if not group_may_write and st.st_uid not in (me, 0):
            raise Untrusted(path, f"lies in {parent}, owned by {_user(st.st_uid)}, who could replace it")
        writable = st.st_mode & (stat.S_IWOTH if group_may_write else stat.S_IWOTH | stat.S_IWGRP)
        if writable and not sticky:
            raise Untrusted(path, f"lies in {parent}, which is {_writable_by_others(st)} "
                                  f"(mode {stat.S_IMODE(st.st_mode):04o}) without the sticky bit")
        if parent == os.path.dirname(parent):
            return
        parent = os.path.dirname(parent)


def private_dir(path: str, create: bool = True) -> str:
    """`path` (resolved), created 0700 where missing, once checked private; raises Untrusted."""
    path = os.path.realpath(os.path.abspath(os.path.expanduser(path)))
    missing = []
    probe = path
    while not os.path.lexists(probe):
        missing.append(probe)
        probe = os.path.dirname(probe)
    if missing and not create:
        raise FileNotFoundError(path)
    for directory in reversed(missing):
        try:
            os.mkdir(directory, 0o700)
        except FileExistsError:
            pass  # created meanwhile (another process): checked below like any existing directory
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise Untrusted(path, "is not a directory")
    check_owned_by_me(path, st)
    _check_ancestors(path, group_may_write=False)
    return path


def private_subdir(root: str, rel: str) -> str:
    """root/rel, where root passed private_dir: each directory under root is created 0700 or checked."""
    path = root
    for part in _parts(rel):
        path = os.path.join(path, part)
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass
        st = os.lstat(path)
        if not stat.S_ISDIR(st.st_mode):
            raise Untrusted(path, "is not a directory")
        check_owned_by_me(path, st)
    return path


def _parts(rel: str) -> list[str]:
    parts = [p for p in rel.split(os.sep) if p not in ("", ".")]
    if os.path.isabs(rel) or ".." in parts:
        raise Untrusted(rel, "is not a path inside the cache")
    return parts


def read_private_file(path: str) -> bytes | None:
    """The bytes of `path` if it is a regular file owned by the user and not writable by others;
    None if it does not exist; raises Untrusted otherwise. Checked on the open file (no race)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as e:
        if os.path.islink(path):
            raise Untrusted(path, "is a symbolic link") from e
        raise
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise Untrusted(path, "is not a regular file")
        check_owned_by_me(path, st)
        return f.read()


def write_file(path: str, data: bytes, mode: int = 0o600) -> None:
    """Atomically replace `path` with `data` (temporary file + rename: readers never see half a file)."""
    tmp = f"{path}.tmp.{os.getpid()}.{time.monotonic_ns()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), mode)  # the umask must not widen or narrow what the cache decides
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def install_private_file(root: str, rel: str, data: bytes) -> str:
    """root/rel holding exactly `data`, written by this user: kept if it already is, else replaced.

    For files another component loads by path (Inductor's kernel libraries and wrapper modules).
    """
    parts = _parts(rel)
    directory = private_subdir(root, os.path.join(*parts[:-1])) if len(parts) > 1 else root
    path = os.path.join(directory, parts[-1])
    try:
        if read_private_file(path) == data:
            return path
    except Untrusted:
        pass  # replaced below: the rename swaps the directory entry, the other file is never read
    write_file(path, data)
    return path


# ------------------------------------------------------------------ shared cache: keyed MAC

def read_key(path: str) -> bytes:
    """The team's secret key; raises Untrusted unless only its owner and group can read or replace it."""
    path = os.path.realpath(os.path.abspath(os.path.expanduser(path)))
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError as e:
        raise Untrusted(path, "does not exist") from e
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise Untrusted(path, "is not a regular file")
        if st.st_mode & stat.S_IRWXO:
            raise Untrusted(path, f"is accessible to all users (mode {stat.S_IMODE(st.st_mode):04o}); "
                                  f"a secret key must be readable by its owner and group only (chmod 0440 or 0640)")
        key = f.read()
    if len(key) < MIN_KEY_BYTES:
        raise Untrusted(path, f"holds {len(key)} bytes; a key needs at least {MIN_KEY_BYTES} random bytes")
    _check_ancestors(path, group_may_write=True)
    return key


def digest(key: bytes | None, label: bytes, body: bytes) -> tuple[str, str]:
    """(scheme, hex digest) of an entry: HMAC-SHA256 under the team key, or SHA-256 in a private cache.

    `label` (the entry's cache key) is covered too, so an entry cannot be moved to another key's place.
    """
    if key is None:
        return "sha256", hashlib.sha256(label + b"\0" + body).hexdigest()
    return "hmac-sha256", hmac.new(key, label + b"\0" + body, hashlib.sha256).hexdigest()


def digest_matches(key: bytes | None, label: bytes, body: bytes, scheme: str, expected: str) -> bool:
    wanted_scheme, actual = digest(key, label, body)
    return scheme == wanted_scheme and hmac.compare_digest(actual, expected)

"""The compile cache never runs code it cannot trust (issue 14, part 1).

The attack: another local user puts a file with the right magic line and the SHA-256 of a crafted
pickle where the victim's cache will look for it. Unpickled, the pickle would create a marker file.
In every case below the marker never appears, the graph is compiled again, and the result equals
CPU eager. The other user is a real second account (created with useradd when the tests run as
root); where none can be created, the cases that need one are skipped with the reason.
"""

import logging
import os
import pathlib
import pickle
import pwd
import secrets
import shutil
import subprocess
import tempfile

import pytest
import torch
import torch.nn.functional as F

import torch_neuronx
from torch_neuronx.compile import cache_trust, neff_cache

ATTACKER = "tnx-cache-attacker"


def gelu_proj(x, w):
    return F.gelu(x @ w) * 2.0


@pytest.fixture(autouse=True)
def isolated(monkeypatch):
    monkeypatch.delenv(neff_cache.KEY_FILE_ENV, raising=False)
    monkeypatch.delenv(neff_cache.DISABLE_ENV, raising=False)
    monkeypatch.delenv(neff_cache.DEPRECATED_DISABLE_ENV, raising=False)
    torch._dynamo.reset()
    torch.neuron.reset_dynamo_metrics()
    yield
    torch._dynamo.reset()


@pytest.fixture(scope="module")
def attacker():
    """(uid, gid) of a second local account, created if needed; skips where that is impossible."""
    try:
        entry = pwd.getpwnam(ATTACKER)
    except KeyError:
        if os.geteuid() != 0:
            pytest.skip("needs a second local user: run as root (to create one with useradd) or create "
                        f"the account {ATTACKER!r}")
        if shutil.which("useradd") is None:
            pytest.skip("needs a second local user and `useradd` is not installed")
        made = subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", ATTACKER],
                              capture_output=True, text=True)
        try:
            entry = pwd.getpwnam(ATTACKER)  # also when a parallel run created it first
        except KeyError:
            pytest.skip(f"cannot create a second local user: useradd failed: {made.stderr.strip()}")
    if os.geteuid() != 0:
        pytest.skip(f"needs root to run a process as {ATTACKER!r}")
    return entry.pw_uid, entry.pw_gid


def as_user(user, script, *args, data=None):
    """Run a shell script as the other user (a real process of that account)."""
    uid, gid = user
    subprocess.run(["/bin/sh", "-c", script, "sh", *args], input=data, user=uid, group=gid, extra_groups=[],
                   cwd="/", check=True, capture_output=True)


@pytest.fixture
def shared_tmp():
    """A directory like /tmp (world-writable, sticky) that both users can reach."""
    path = tempfile.mkdtemp(prefix="tnx-shared-tmp-", dir="/tmp")
    os.chmod(path, 0o1777)
    yield path
    shutil.rmtree(path, ignore_errors=True)


class Exec:
    """Unpickling this runs `code` (what an attacker's pickle does)."""

    def __init__(self, code):
        self.code = code

    def __reduce__(self):
        return exec, (self.code,)


def crafted_body(marker):
    return pickle.dumps(Exec(f"open({marker!r}, 'w').write('attacker code ran')"), protocol=2)


def crafted_entry(key, marker, mac_key=None):
    """An entry with the right magic line and a valid digest (SHA-256, or HMAC under `mac_key`)."""
    body = crafted_body(marker)
    scheme, digest = cache_trust.digest(mac_key, key.encode(), body)
    return neff_cache.MAGIC + f"{scheme} {digest}\n".encode() + body


def compile_and_check():
    """Compile gelu_proj on neuron in a fresh Dynamo; the result must equal CPU eager."""
    torch._dynamo.reset()
    torch.neuron.reset_dynamo_metrics()
    x, w = torch.randn(4, 128), torch.randn(128, 48)
    with torch.no_grad():
        out = torch.compile(gelu_proj, backend="neuron")(x.to("neuron"), w.to("neuron")).cpu()
    torch.testing.assert_close(out, gelu_proj(x, w), rtol=1e-4, atol=1e-4)
    return torch_neuronx.compile_stats()


def entries(root):
    """cache key -> path of each model.neff under root."""
    found = {}
    for d, _, files in os.walk(root):
        if neff_cache.NEFF_FILE in files:
            found[os.path.basename(d)[len("MODULE_"):]] = os.path.join(d, neff_cache.NEFF_FILE)
    return found


@pytest.fixture(scope="module")
def layout(tmp_path_factory):
    """Where the victim's graph lives in a cache: [(relative path of model.neff, cache key)]."""
    root = str(tmp_path_factory.mktemp("victim-private-cache"))
    saved = os.environ.get(neff_cache.CACHE_DIR_ENV)
    os.environ[neff_cache.CACHE_DIR_ENV] = root
    try:
        compile_and_check()
    finally:
        if saved is None:
            os.environ.pop(neff_cache.CACHE_DIR_ENV)
        else:
            os.environ[neff_cache.CACHE_DIR_ENV] = saved
    found = entries(root)
    assert found, "the victim's compile stored no entry"
    return [(os.path.relpath(path, root), key) for key, path in found.items()]


def test_crafted_entry_is_live_code():
    """Control: the crafted entry is well formed, and decoding it as a trusted entry runs its code.

    So in the tests below only the trust checks stand between the attacker and the victim."""
    with tempfile.TemporaryDirectory() as d:
        marker = os.path.join(d, "marker")
        with pytest.raises(neff_cache.CorruptEntry):  # what remains of the payload is no entry
            neff_cache._decode(crafted_entry("k" * 40, marker), "k" * 40, None)
        assert os.path.exists(marker)


def test_another_users_cache_directory_is_never_read(attacker, shared_tmp, layout, monkeypatch, caplog):
    """The issue's attack: the other user creates the cache directory first (e.g. /tmp/neff_cache, the
    Neuron SDK's default) and fills the victim's entries with crafted pickles of valid checksum."""
    cache = os.path.join(shared_tmp, "neff_cache")
    marker = os.path.join(shared_tmp, "marker")
    as_user(attacker, 'umask 000 && mkdir "$1"', cache)
    for rel, key in layout:
        path = os.path.join(cache, rel)
        as_user(attacker, 'umask 000 && mkdir -p "$(dirname "$1")" && cat > "$1"', path,
                data=crafted_entry(key, marker))
    monkeypatch.setenv(neff_cache.CACHE_DIR_ENV, cache)
    with caplog.at_level(logging.WARNING, logger="torch_neuronx.compile"):
        s = compile_and_check()
    assert not os.path.exists(marker), "attacker code ran in the victim's process"
    assert s["cache_hits"] == 0 and s["neffs_built"] == 1
    warning = next(r.getMessage() for r in caplog.records if "not using the compile cache" in r.getMessage())
    assert cache in warning and f"owned by uid {attacker[0]} ({ATTACKER})" in warning
    # Nothing of the victim's was written into the other user's directory either.
    assert all(os.lstat(os.path.join(d, f)).st_uid == attacker[0]
               for d, dirs, files in os.walk(cache) for f in dirs + files)


def test_own_cache_directory_that_others_can_write_is_never_read(attacker, shared_tmp, layout, monkeypatch,
                                                                 caplog):
    """The victim's own directory, made writable by everyone (a careless chmod): the other user adds entries."""
    cache = pathlib.Path(shared_tmp) / "cache"
    cache.mkdir()
    os.chmod(cache, 0o777)
    marker = os.path.join(shared_tmp, "marker")
    for rel, key in layout:
        as_user(attacker, 'umask 000 && mkdir -p "$(dirname "$1")" && cat > "$1"', str(cache / rel),
                data=crafted_entry(key, marker))
    monkeypatch.setenv(neff_cache.CACHE_DIR_ENV, str(cache))
    with caplog.at_level(logging.WARNING, logger="torch_neuronx.compile"):
        s = compile_and_check()
    assert not os.path.exists(marker), "attacker code ran in the victim's process"
    assert s["cache_hits"] == 0 and s["neffs_built"] == 1
    assert any(str(cache) in r.getMessage() and "writable by all users (mode 0777)" in r.getMessage()
               for r in caplog.records)


def test_entry_owned_by_another_user_in_a_private_cache_is_not_read(attacker, tmp_path, layout, monkeypatch,
                                                                    caplog):
    """A private directory holding a file that is not the victim's (planted by root or a since-fixed chmod)."""
    cache = tmp_path / "cache"
    marker = str(tmp_path / "marker")
    for rel, key in layout:
        path = cache / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(crafted_entry(key, marker))
        os.chown(path, *attacker)
    for d in [cache] + [p for p in cache.rglob("*") if p.is_dir()]:
        os.chmod(d, 0o700)
    monkeypatch.setenv(neff_cache.CACHE_DIR_ENV, str(cache))
    with caplog.at_level(logging.WARNING, logger="torch_neuronx.compile"):
        s = compile_and_check()
    assert not os.path.exists(marker), "attacker code ran in the victim's process"
    assert s["cache_hits"] == 0 and s["neffs_built"] == 1 and s["cache_rejected_entries"] == 1
    assert any("not reading compile cache entry" in r.getMessage() and f"owned by uid {attacker[0]}" in r.getMessage()
               for r in caplog.records)
    # The entry was replaced by the victim's own, which the next compile loads.
    assert all(os.stat(path).st_uid == os.geteuid() for path in entries(cache).values())
    assert compile_and_check()["cache_hits"] == 1


def test_another_users_inductor_directory_is_refused(attacker, shared_tmp, monkeypatch):
    """Inductor loads any wrapper module or kernel library in its directory: one the other user owns is
    refused before anything is compiled or loaded from it."""
    inductor = os.path.join(shared_tmp, "torchinductor_victim")
    as_user(attacker, 'umask 000 && mkdir "$1"', inductor)
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", inductor)
    monkeypatch.setenv(neff_cache.DISABLE_ENV, "1")
    x, w = torch.randn(4, 128, device="neuron"), torch.randn(128, 48, device="neuron")
    with pytest.raises(Exception, match=f"Inductor's kernel directory {inductor} is owned by uid {attacker[0]}"
                                        f".*TORCHINDUCTOR_CACHE_DIR"):
        torch.compile(gelu_proj, backend="neuron")(x, w)


# ------------------------------------------------------------------ shared team cache

@pytest.fixture
def team_cache(tmp_path, monkeypatch):
    """A shared cache directory (group-writable, as a team's would be) and the team's key file."""
    cache = tmp_path / "team-cache"
    cache.mkdir()
    os.chmod(cache, 0o2770)
    key_file = tmp_path / "team.key"
    key_file.write_bytes(secrets.token_bytes(32))
    os.chmod(key_file, 0o440)
    monkeypatch.setenv(neff_cache.CACHE_DIR_ENV, str(cache))
    monkeypatch.setenv(neff_cache.KEY_FILE_ENV, str(key_file))
    return cache, key_file


def test_shared_cache_entries_are_authenticated_and_reused(team_cache):
    cache, key_file = team_cache
    assert compile_and_check()["neffs_built"] == 1
    (entry,) = entries(cache).values()
    assert open(entry, "rb").read().split(b"\n")[1].startswith(b"hmac-sha256 ")
    s = compile_and_check()
    assert s["cache_hits"] == 1 and s["neffs_built"] == 0


def tampered(entry, key, marker):
    """A team member's entry whose body was replaced with the crafted pickle (the MAC kept)."""
    magic, header, _ = entry.split(b"\n", 2)
    return magic + b"\n" + header + b"\n" + crafted_body(marker)


def truncated(entry, key, marker):
    """The tampered entry cut before the pickle's end: a partial unpickling would run it just the same."""
    return tampered(entry, key, marker)[:-1]


def foreign_key(entry, key, marker):
    """The crafted pickle with a valid MAC under another key (the attacker's own, another team's)."""
    return crafted_entry(key, marker, mac_key=secrets.token_bytes(32))


@pytest.mark.parametrize("attack", [tampered, truncated, foreign_key])
def test_shared_cache_entry_that_fails_authentication_is_never_deserialized(team_cache, attack, caplog):
    cache, key_file = team_cache
    compile_and_check()
    ((key, entry),) = entries(cache).items()
    marker = str(cache.parent / "marker")
    with open(entry, "rb") as f:
        good = f.read()
    with open(entry, "wb") as f:
        f.write(attack(good, key, marker))
    with caplog.at_level(logging.WARNING, logger="torch_neuronx.compile"):
        s = compile_and_check()
    assert not os.path.exists(marker), "attacker code ran in the victim's process"
    assert s["cache_hits"] == 0 and s["neffs_built"] == 1 and s["cache_rejected_entries"] == 1
    assert any(entry in r.getMessage() and "fails authentication" in r.getMessage() for r in caplog.records)
    assert compile_and_check()["cache_hits"] == 1  # rebuilt and stored again with the team's MAC


def test_shared_cache_key_readable_by_everyone_is_refused(team_cache, caplog):
    cache, key_file = team_cache
    os.chmod(key_file, 0o444)
    with caplog.at_level(logging.WARNING, logger="torch_neuronx.compile"):
        assert neff_cache.open_store() is None
    assert any(str(key_file) in r.getMessage() and "accessible to all users" in r.getMessage()
               for r in caplog.records)


def test_real_disable_name_and_deprecated_alias(monkeypatch, caplog):
    monkeypatch.setattr(neff_cache, "_warned", set())
    monkeypatch.setenv(neff_cache.DISABLE_ENV, "1")
    assert not neff_cache.enabled()
    monkeypatch.delenv(neff_cache.DISABLE_ENV)
    monkeypatch.setenv(neff_cache.DEPRECATED_DISABLE_ENV, "1")
    with caplog.at_level(logging.WARNING, logger="torch_neuronx.compile"):
        assert not neff_cache.enabled()
        assert not neff_cache.enabled()
    assert sum(neff_cache.DISABLE_ENV in r.getMessage() and "deprecated" in r.getMessage()
               for r in caplog.records) == 1  # once per process
    monkeypatch.setenv(neff_cache.DISABLE_ENV, "0")  # the real name wins
    assert neff_cache.enabled()


def test_default_cache_is_per_user_and_private(tmp_path, monkeypatch):
    monkeypatch.delenv(neff_cache.CACHE_DIR_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    store = neff_cache.open_store()
    assert store is not None and store.key is None
    assert store.root.startswith(str(tmp_path / "xdg"))
    path = store.root
    while path != str(tmp_path):  # every directory the cache created: 0700, owned by the user
        st = os.stat(path)
        assert st.st_uid == os.geteuid() and st.st_mode & 0o777 == 0o700, path
        path = os.path.dirname(path)

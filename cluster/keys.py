"""``cosim keys NAME``: a CURVE key pair for a unit server or a master, kept in a key directory.

Writes ``NAME.key`` (the public key: hand it to the other side) and ``NAME.key_secret``
(keep it; mode 0600) in the ZeroMQ certificate format (``zmq.auth``), in the key directory:
``--dir``, else ``$COSIM_KEY_DIR``, else ``cosim/keys`` in the user's configuration directory
(:func:`key_dir`; made with mode 0700). A secret is never written inside a git work tree
unless asked (``--in-git``): a commit would publish it. ``cosim keys --where`` prints the
directory; ``cosim keys --authorize PUBLIC.key`` copies a public key into its
``authorized/`` folder, the ``--authorized`` directory of ``cosim serve``. A server runs with
``cosim serve UNIT_FILE --curve-secret server.key_secret --authorized DIR``; a master with
``cosim run MODEL --server-key server.key --client-key master.key_secret``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

__all__ = ["KEY_DIR_VARIABLE", "authorize", "git_work_tree", "key_dir", "main", "make_keys"]

#: Environment variable that moves the default key directory.
KEY_DIR_VARIABLE = "COSIM_KEY_DIR"


def key_dir() -> Path:
    """The default key directory: ``$COSIM_KEY_DIR``, else ``cosim/keys`` under the user's
    configuration directory (``$XDG_CONFIG_HOME`` or ``~/.config`` on Linux,
    ``~/Library/Application Support`` on macOS, ``%APPDATA%`` on Windows)."""
    chosen = os.environ.get(KEY_DIR_VARIABLE)
    if chosen:
        return Path(chosen).expanduser()
    if sys.platform == "win32":
        base = Path(os.environ.get("APPDATA") or Path.home() / "AppData" / "Roaming")
    elif sys.platform == "darwin":
        base = Path.home() / "Library" / "Application Support"
    else:
        base = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return base / "cosim" / "keys"


def git_work_tree(path) -> Path | None:
    """The git work tree ``path`` lies in (a folder with ``.git`` among it and its
    parents), or None."""
    path = Path(path).expanduser().resolve()
    for folder in (path, *path.parents):
        if (folder / ".git").exists():
            return folder
    return None


def make_keys(name: str, directory=None, *, in_git: bool = False) -> tuple[Path, Path]:
    """Write the key pair ``NAME.key`` / ``NAME.key_secret`` in ``directory``.

    Parameters
    ----------
    name : str
        File name of the pair (letters, digits, ``_`` and ``-``).
    directory : path, optional
        Where to write them (default: :func:`key_dir`); made (mode 0700) when missing.
    in_git : bool
        Write even inside a git work tree.

    Returns
    -------
    public, secret : Path
        The secret file has mode 0600.

    Raises
    ------
    ValueError
        A name with other characters (it becomes a file name).
    FileExistsError
        When either file exists (a key pair in use is never overwritten).
    PermissionError
        ``directory`` is inside a git work tree and ``in_git`` is false.
    """
    from zmq import auth
    if not name or not name.replace("_", "").replace("-", "").isalnum():
        raise ValueError(f"{name!r}: a key name uses letters, digits, '_' and '-'")
    directory = Path(directory).expanduser() if directory is not None else key_dir()
    tree = git_work_tree(directory)
    if tree is not None and not in_git:
        raise PermissionError(f"{directory} is inside the git work tree {tree}: a secret key "
                              "there is one `git add` away from being published. Write it "
                              f"to the key directory (default {key_dir()}), or pass "
                              "--in-git if the files are ignored there")
    public, secret = directory / f"{name}.key", directory / f"{name}.key_secret"
    for path in (public, secret):
        if path.exists():
            raise FileExistsError(f"{path} exists; remove it or choose another name")
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    # The secret is written under a umask that keeps it private from its first byte.
    old = os.umask(0o077)
    try:
        made_public, made_secret = auth.create_certificates(str(directory), name)
    finally:
        os.umask(old)
    Path(made_secret).chmod(0o600)
    Path(made_public).chmod(0o644)
    return Path(made_public), Path(made_secret)


def authorize(public, directory=None) -> Path:
    """Copy the public key file ``public`` into ``<directory>/authorized`` (default
    directory: :func:`key_dir`), the folder ``cosim serve --authorized`` reads.

    Raises
    ------
    ValueError
        ``public`` is a secret key file, or not a public key.
    """
    from zmq import auth
    public = Path(public).expanduser()
    if public.name.endswith("_secret"):
        raise ValueError(f"{public} is a secret key: authorize the other side's public key "
                         "(NAME.key)")
    try:
        auth.load_certificate(str(public))
    except (OSError, ValueError) as err:
        raise ValueError(f"{public} is not a public key file ({err})") from None
    target = (Path(directory).expanduser() if directory is not None else key_dir()) \
        / "authorized"
    target.mkdir(mode=0o700, parents=True, exist_ok=True)
    dest = target / public.name
    if dest.resolve() != public.resolve():
        shutil.copyfile(public, dest)
    return dest


def main(argv=None) -> int:
    """``cosim keys NAME [--dir DIR] [--in-git]``, ``cosim keys --where``, ``cosim keys
    --authorize PUBLIC.key``."""
    ap = argparse.ArgumentParser(
        prog="cosim keys", description="Make a CURVE key pair (NAME.key public, "
        f"NAME.key_secret secret, mode 0600) for cosim serve and cosim run, in the key "
        f"directory (${KEY_DIR_VARIABLE}, default {key_dir()}).")
    ap.add_argument("name", nargs="?", help="file name of the pair, e.g. battery_server or "
                    "ev_master")
    ap.add_argument("--dir", default=None, help="where to write them (default: the key "
                    "directory)")
    ap.add_argument("--in-git", action="store_true", help="write a secret inside a git work "
                    "tree all the same (refused otherwise: a commit would publish it)")
    ap.add_argument("--where", action="store_true", help="print the key directory and stop")
    ap.add_argument("--authorize", metavar="PUBLIC_KEY", help="copy another side's public "
                    "key into DIR/authorized (what cosim serve --authorized reads)")
    args = ap.parse_args(argv)
    directory = Path(args.dir).expanduser() if args.dir else key_dir()
    try:
        if args.where:
            print(directory)
            return 0
        if args.authorize:
            dest = authorize(args.authorize, directory)
            print(f"authorized {dest} (cosim serve ... --authorized {dest.parent})")
            return 0
        if args.name is None:
            ap.error("give a NAME (or --where, or --authorize PUBLIC_KEY)")
        public, secret = make_keys(args.name, directory, in_git=args.in_git)
    except (OSError, ValueError) as err:
        print(f"cosim keys: error: {err}", file=sys.stderr)
        return 2
    print(f"wrote {public} (public: give it to the other side) and {secret} (secret: keep "
          "it)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

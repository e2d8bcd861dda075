"""``cosim keys NAME``: a CURVE key pair for a unit server or a master.

Writes ``NAME.key`` (the public key: hand it to the other side) and ``NAME.key_secret``
(keep it) in the ZeroMQ certificate format (``zmq.auth``). A server runs with
``cosim serve UNIT_FILE --curve-secret server.key_secret --authorized DIR`` (DIR holds the
public keys of the masters it lets in); a master runs with ``cosim run MODEL --server-key
server.key --client-key master.key_secret``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

__all__ = ["main", "make_keys"]


def make_keys(name: str, directory=".") -> tuple[Path, Path]:
    """Write the key pair ``NAME.key`` / ``NAME.key_secret`` in ``directory``.

    Returns
    -------
    public, secret : Path

    Raises
    ------
    FileExistsError
        When either file exists (a key pair in use is never overwritten).
    """
    from zmq import auth
    directory = Path(directory)
    public, secret = directory / f"{name}.key", directory / f"{name}.key_secret"
    for path in (public, secret):
        if path.exists():
            raise FileExistsError(f"{path} exists; remove it or choose another name")
    directory.mkdir(parents=True, exist_ok=True)
    made_public, made_secret = auth.create_certificates(str(directory), name)
    Path(made_secret).chmod(0o600)       # readable by its owner only
    return Path(made_public), Path(made_secret)


def main(argv=None) -> int:
    """``cosim keys NAME [--dir DIR]``."""
    ap = argparse.ArgumentParser(prog="cosim keys", description="Make a CURVE key pair "
                                 "(NAME.key public, NAME.key_secret secret) for cosim serve "
                                 "and cosim run.")
    ap.add_argument("name", help="file name of the pair, e.g. battery_server or ev_master")
    ap.add_argument("--dir", default=".", help="where to write them (default: here)")
    args = ap.parse_args(argv)
    if not args.name.replace("_", "").replace("-", "").isalnum():
        print(f"cosim keys: error: {args.name!r}: use letters, digits, '_' and '-'",
              file=sys.stderr)
        return 2
    try:
        public, secret = make_keys(args.name, args.dir)
    except OSError as err:
        print(f"cosim keys: error: {err}", file=sys.stderr)
        return 2
    print(f"wrote {public} (public: give it to the other side) and {secret} (secret: keep "
          "it)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

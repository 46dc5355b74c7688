"""A real PostgreSQL server for the tests: `initdb` and `pg_ctl` into a temporary directory.

The binaries come from PATH or Debian's `postgresql` package (/usr/lib/postgresql/<v>/bin).
The server listens only on a Unix socket in its own directory (no TCP port, nothing shared with
another test run), runs as the `postgres` system user when the tests run as root (initdb refuses
root), and is stopped (`pg_ctl stop -m immediate`) when the session ends.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

REQUIRE_ENV = "SGSBATCH_REQUIRE_POSTGRES"


def find_bin(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    versions = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"),
                      key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0)
    return versions[-1] if versions else None


@dataclass
class PgServer:
    root: Path
    socket_dir: Path
    port: int
    user: str

    def url(self, database: str) -> str:
        return f"postgresql+psycopg://{self.user}@/{database}?host={self.socket_dir}&port={self.port}"

    def createdb(self, name: str) -> str:
        """A fresh database; returns its SQLAlchemy URL."""
        self._as_owner([find_bin("createdb") or "createdb", "-h", str(self.socket_dir), "-p", str(self.port),
                        "-U", self.user, name])
        return self.url(name)

    def stop(self) -> None:
        self._as_owner([find_bin("pg_ctl") or "pg_ctl", "-D", str(self.root / "data"), "-m", "immediate", "stop"],
                       check=False)

    def _as_owner(self, argv: list[str], check: bool = True) -> subprocess.CompletedProcess[str]:
        if os.geteuid() == 0:
            argv = ["runuser", "-u", self.user, "--", *argv]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        if check and proc.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed: {proc.stdout}{proc.stderr}")
        return proc


def start(root: Path, port: int = 5432) -> PgServer | str:
    """A running server under `root`, or why there cannot be one (a sentence)."""
    initdb, pg_ctl = find_bin("initdb"), find_bin("pg_ctl")
    if initdb is None or pg_ctl is None:
        return "no PostgreSQL binaries (initdb, pg_ctl): apt-get install postgresql"
    user = "postgres" if os.geteuid() == 0 else pwd.getpwuid(os.geteuid()).pw_name
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(user)
        except KeyError:
            return "running as root without a `postgres` user to run the server as"
    root.mkdir(parents=True, exist_ok=True)
    socket_dir = root / "sock"
    socket_dir.mkdir(exist_ok=True)
    if os.geteuid() == 0:
        shutil.chown(root, user)
        shutil.chown(socket_dir, user)
        os.chmod(root, 0o755)
    server = PgServer(root, socket_dir, port, user)
    server._as_owner([initdb, "-D", str(root / "data"), "-U", user, "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync"])
    opts = f"-k {socket_dir} -p {port} -c listen_addresses='' -c fsync=off -c max_connections=200"
    server._as_owner([pg_ctl, "-D", str(root / "data"), "-l", str(root / "server.log"), "-w", "-o", opts, "start"])
    return server

"""One writer of ``runs/<profile>`` at a time: :class:`ProfileLock`, the lock ``./run_all.sh`` takes and every other
entry point that writes into a profile's run folder takes too (e.g. ``python -m helpers.training.recipes``)."""
from __future__ import annotations

import json
import os
import time

from helpers.core.config import reports_dir, shown_path


class ProfileBusy(RuntimeError):
    """Another live process holds the profile's lock."""


class ProfileLock:
    """``reports/<profile>/.run.lock`` holding the pid of the run that owns the profile; a second run is refused
    with that pid, a lock left by a dead process is taken over."""

    def __init__(self, profile: str):
        self.path = reports_dir(profile) / ".run.lock"
        self.profile = profile
        self.held = False

    def __enter__(self) -> "ProfileLock":
        for _ in range(3):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                try:
                    info = json.loads(self.path.read_text() or "{}")
                except (FileNotFoundError, json.JSONDecodeError):
                    info = {}
                pid = info.get("pid")
                if isinstance(pid, int) and _alive(pid):
                    raise ProfileBusy(
                        f"profile {self.profile!r} is being run by pid {pid} (started {info.get('started', '?')}, "
                        f"lock {shown_path(self.path)}); wait for it to finish or stop that process"
                    ) from None
                print(f"run_all: taking over the stale lock {shown_path(self.path)} of pid {pid} (no longer running)", flush=True)
                self.path.unlink(missing_ok=True)
                continue
            with os.fdopen(fd, "w") as f:
                json.dump({"pid": os.getpid(), "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}, f)
            self.held = True
            return self
        raise ProfileBusy(f"cannot take the lock {self.path}")

    def __exit__(self, *exc) -> None:
        if self.held:
            self.path.unlink(missing_ok=True)
            self.held = False


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True

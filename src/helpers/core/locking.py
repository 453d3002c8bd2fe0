"""One writer of ``runs/<profile>`` at a time: :class:`ProfileLock`, the lock ``./run_all.sh`` takes and every other
entry point that writes into a profile's run folder takes too (e.g. ``python -m helpers.training.launch``).

The one exception is a job array training one budget per task (``python -m helpers.training.launch --array-task N``):
each task takes its budget's lock (``ProfileLock(profile, budget=...)``), so tasks of different budgets run side by
side, while the profile's own lock and any budget's lock exclude each other (a ``./run_all.sh`` is refused while an
array task trains, and an array task while ``./run_all.sh`` runs). A lock records its host: on a shared file system a
lock taken on another machine is never taken over as stale (its process cannot be seen from here)."""
from __future__ import annotations

import errno
import json
import os
import socket
import time

from helpers.core.config import reports_dir, shown_path


class ProfileBusy(RuntimeError):
    """Another live process holds the profile's lock."""


class ProfileLock:
    """``reports/<profile>/.run.lock`` holding the pid of the run that owns the profile; a second run is refused
    with that pid, a lock left by a dead process is taken over."""

    def __init__(self, profile: str, budget: str | None = None):
        self.main = reports_dir(profile) / ".run.lock"  # the profile's own lock (./run_all.sh, torchrun)
        self.path = self.main if budget is None else self.main.with_name(f".train-{budget}.lock")
        self.profile, self.budget = profile, budget
        self.held = False

    def __enter__(self) -> "ProfileLock":
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            return self._take()
        except PermissionError as e:  # EACCES/EPERM: a folder the user may not write
            raise PermissionError(self._unwritable(e)) from None
        except OSError as e:
            if e.errno == errno.EROFS:  # a read-only file system (a mounted checkout)
                raise OSError(self._unwritable(e)) from None
            raise

    def _unwritable(self, e: OSError) -> str:
        return (f"cannot write {shown_path(self.path.parent)}/ ({os.strerror(e.errno) if e.errno else e}): the run "
                f"writes its reports there; make it writable, or point STORYBENCH_REPORTS to a writable folder")

    def _take(self) -> "ProfileLock":
        for _ in range(5):
            if self._create():
                self.held = True
                try:  # the profile's lock and a budget's exclude each other (an array task beside ./run_all.sh)
                    for other in ([self.main] if self.budget else sorted(self.main.parent.glob(".train-*.lock"))):
                        if (held := _holder(other)) is not None:
                            raise ProfileBusy(f"profile {self.profile!r}: {held}; wait for it to finish or stop it")
                except BaseException:
                    self.__exit__(None, None, None)
                    raise
                return self
            try:
                text = self.path.read_text()
                info = json.loads(text or "{}")
            except FileNotFoundError:
                continue  # released in between: try again
            except json.JSONDecodeError:
                info = {}
            pid = info.get("pid")
            if not isinstance(pid, int) and _young(self.path):  # being written by an older writer: not stale yet
                time.sleep(0.2)
                continue
            if isinstance(pid, int) and (_alive(pid) or info.get("host", HOST) != HOST):
                elsewhere = "" if info.get("host", HOST) == HOST else (
                    f" on host {info['host']} (not checked from here: delete the lock if that run is gone)")
                raise ProfileBusy(
                    f"profile {self.profile!r}{f' budget {self.budget!r}' if self.budget else ''} is being run by pid "
                    f"{pid}{elsewhere} (started {info.get('started', '?')}, lock {shown_path(self.path)}); wait for it "
                    f"to finish or stop that process"
                ) from None
            print(f"run_all: taking over the stale lock {shown_path(self.path)} of pid {pid} (no longer running)", flush=True)
            self.path.unlink(missing_ok=True)
        raise ProfileBusy(f"cannot take the lock {shown_path(self.path)}")

    def _create(self) -> bool:
        """Create the lock with its content in one step: the pid is written to a private file first, which is then
        hard-linked to the lock's name (fails if that exists), so no reader ever sees an empty lock."""
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"pid": os.getpid(), "host": HOST,
                                   "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}))
        try:
            os.link(tmp, self.path)
            return True
        except FileExistsError:
            return False
        except OSError:  # a file system without hard links: exclusive create, then the content (a reader waits)
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                return False
            with os.fdopen(fd, "w") as f:
                f.write(tmp.read_text())
            return True
        finally:
            tmp.unlink(missing_ok=True)

    def __exit__(self, *exc) -> None:
        if self.held:
            self.path.unlink(missing_ok=True)
            self.held = False


HOST = socket.gethostname()


def _holder(path) -> str | None:
    """Who holds the lock file ``path`` ("pid N on host H, lock L"), or None when nobody live does."""
    try:
        info = json.loads(path.read_text() or "{}")
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    pid, host = info.get("pid"), info.get("host", HOST)
    if not isinstance(pid, int) or (host == HOST and not _alive(pid)):
        return None
    return f"pid {pid}{'' if host == HOST else f' on host {host}'} holds {shown_path(path)}"


def _young(path, seconds: float = 5.0) -> bool:
    try:
        return time.time() - path.stat().st_mtime < seconds
    except FileNotFoundError:
        return False


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

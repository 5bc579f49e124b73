"""A Spark standalone cluster on this machine: a master and workers, each its own JVM.

What the cluster tests and ``benchmarks/bench_spark.py --cluster`` run against, and a
way for a user to try Spark mode on a real cluster before deploying::

    with LocalCluster(workers=2, root=Path("/tmp/cluster")) as cluster:
        spark = SparkSession.builder.master(cluster.master_url).getOrCreate()
        db = ivm.connect("/tmp/cluster/state", spark=spark)

The processes are started with Spark's own ``spark-class`` from the installed pyspark
(no separate Spark install). ``kill_worker`` kills a worker with every process under it
(its executor JVM and the executor's Python workers) at once, as a machine that dies
would (Linux: the process tree is read from ``/proc``). State shared by the workers
(ivm's partition files) lives on the local path the session is given: the workers share
this machine's disk.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

from pyspark.find_spark_home import _find_spark_home

from ivm.errors import IvmError

MASTER = "org.apache.spark.deploy.master.Master"
WORKER = "org.apache.spark.deploy.worker.Worker"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _parent_of(pid: int) -> int:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0
    return int(stat.rsplit(")", 1)[1].split()[1])  # after "pid (command) state"


def _descendants(root: int) -> list[int]:
    parents = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            parents[int(entry.name)] = _parent_of(int(entry.name))
    found, frontier = [], [root]
    while frontier:
        children = [pid for pid, parent in parents.items() if parent in frontier]
        found += children
        frontier = children
    return found


class LocalCluster:
    """A standalone Spark master and ``workers`` workers of ``cores`` cores and
    ``memory`` each, logging and working under ``root``; a context manager."""

    def __init__(
        self, root: Path, *, workers: int = 2, cores: int = 1, memory: str = "2g",
        start_timeout: float = 120.0,
    ) -> None:
        self.root = Path(root)
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self.start_timeout = start_timeout
        self.port = _free_port()
        self.ui_port = _free_port()
        self._master: subprocess.Popen[bytes] | None = None
        self._workers: list[subprocess.Popen[bytes]] = []

    @property
    def master_url(self) -> str:
        """The URL a SparkSession's ``master`` is set to."""
        return f"spark://127.0.0.1:{self.port}"

    def __enter__(self) -> LocalCluster:
        self.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> None:
        """Start the master and the workers; return once every worker is registered."""
        self.root.mkdir(parents=True, exist_ok=True)
        self._master = self._launch(
            "master", MASTER, "--host", "127.0.0.1", "--port", str(self.port),
            "--webui-port", str(self.ui_port),
        )
        self._wait_for(lambda: self._alive_workers() is not None, "the master to start")
        for number in range(self.workers):
            work = self.root / f"worker{number}"
            work.mkdir(exist_ok=True)
            self._workers.append(self._launch(
                f"worker{number}", WORKER, "--host", "127.0.0.1", "--cores", str(self.cores),
                "--memory", self.memory, "--work-dir", str(work), "--webui-port", "0",
                self.master_url,
            ))
        self._wait_for(lambda: self._alive_workers() == self.workers, "the workers to register")

    def stop(self) -> None:
        """Stop every process of the cluster (workers with their executors, then the master)."""
        for number, process in enumerate(self._workers):
            if process.poll() is None:
                self.kill_worker(number)
        if self._master is not None and self._master.poll() is None:
            os.killpg(self._master.pid, signal.SIGKILL)
            self._master.wait()
        self._workers.clear()
        self._master = None

    def worker_running(self, pid: int) -> int | None:
        """The number of the worker process ``pid`` descends from (its executor JVM or
        one of the executor's Python workers), if any."""
        workers = {process.pid: number for number, process in enumerate(self._workers)}
        while pid > 1:
            if pid in workers:
                return workers[pid]
            pid = _parent_of(pid)
        return None

    def kill_worker(self, number: int) -> None:
        """Kill worker ``number`` and every process under it (its executor and the
        executor's Python workers, which lead their own process group) with SIGKILL at
        once, as a machine that dies would."""
        process = self._workers[number]
        for pid in [process.pid, *_descendants(process.pid)]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        process.wait()

    def alive(self, number: int) -> bool:
        """Whether worker ``number`` is still running."""
        return self._workers[number].poll() is None

    def _launch(self, name: str, main: str, *arguments: str) -> subprocess.Popen[bytes]:
        home = _find_spark_home()
        log = (self.root / f"{name}.log").open("wb")
        env = {**os.environ, "SPARK_HOME": home, "SPARK_NO_DAEMONIZE": "1"}
        return subprocess.Popen(
            [str(Path(home) / "bin" / "spark-class"), main, *arguments],
            stdout=log, stderr=subprocess.STDOUT, env=env, cwd=self.root,
            start_new_session=True,  # not killed with the terminal that started it
        )

    def _alive_workers(self) -> int | None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=2) as r:
                return int(json.load(r)["aliveworkers"])
        except (OSError, ValueError, KeyError):
            return None

    def _wait_for(self, ready: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if ready():
                return
            if self._master is not None and self._master.poll() is not None:
                break
            time.sleep(0.25)
        self.stop()
        raise IvmError(
            f"the local Spark cluster did not start: waited {self.start_timeout:.0f} s for "
            f"{what}; see the logs in {self.root}"
        )

"""paddle.distributed.launch as senti runs it: the rendezvous bound to the address the user gave, and gone with senti.

`senti.toolkit.cluster.launch` starts this module (`python -m senti.toolkit.cluster.launcher ARGS`, Paddle's launcher arguments)
instead of `paddle.distributed.launch`. Two things differ:
- Paddle's rendezvous server (`KVServer`, an HTTP server) binds every interface whatever host `--master` names;
  here it binds that host (`SENTI_MASTER_HOST`), so `--master 127.0.0.1:PORT` listens on loopback only.
- The launcher runs in a session of its own (so Ctrl-C reaches senti first); if senti is killed outright it would
  go on training with its workers. It asks the kernel to end it when senti ends (`core.runtime.die_with_parent`),
  and each worker does the same with the launcher (`toolkit.distributed`).
"""

from __future__ import annotations

import os
import signal

MASTER_HOST = "SENTI_MASTER_HOST"  # the host of --master: the rendezvous binds it
PARENT_PID = "SENTI_PARENT_PID"  # the senti process that started this launcher


def bind_rendezvous_to(host: str) -> None:
    """Make Paddle's KVServer bind `host` instead of every interface."""
    from paddle.distributed.launch.utils import kv_server

    def server_bind(self) -> None:
        self.server_address = (host, self.server_address[1])
        kv_server.HTTPServer.server_bind(self)

    kv_server.KVServer.server_bind = server_bind  # type: ignore[method-assign]


def main() -> None:
    from senti.core.runtime import die_with_parent, import_paddle

    die_with_parent(signal.SIGTERM, int(os.environ.get(PARENT_PID, "0") or 0))  # the launcher stops its workers
    import_paddle()  # else Paddle's import prints its OMP_NUM_THREADS advice into every data-parallel run's output
    if os.environ.get(MASTER_HOST):
        bind_rendezvous_to(os.environ[MASTER_HOST])
    from paddle.distributed.launch.main import launch

    launch()


if __name__ == "__main__":
    main()

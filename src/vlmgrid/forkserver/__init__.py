"""The jobs' warm start: a fork server that imports their modules once and runs each command in a forked
child. Only vlmgrid.cli (which hands the server the command's entry point) imports it.

    protocol  what the client sends and the server answers, and the client (`run_through_server`)
    server    the serve loop: preload, fork, reap, idle and parent stop (`serve`)
    sockets   the socket's private folder and its safety; the server a Snakemake run starts (`start`, `stop`)
"""

from vlmgrid.forkserver.protocol import ENV, per_job, run_through_server
from vlmgrid.forkserver.server import serve
from vlmgrid.forkserver.sockets import FOLDER_PREFIX, Started, start, stop

__all__ = ["ENV", "FOLDER_PREFIX", "Started", "per_job", "run_through_server", "serve", "start", "stop"]

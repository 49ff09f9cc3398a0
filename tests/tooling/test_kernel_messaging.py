"""The cause of the ten-minute stall of `make test` (issue 11), and the fix `make outputs` uses.

nbclient awaits a cell's execute_reply by polling the shell socket (zmq.asyncio). When the
cell shows an ipywidgets ``interactive`` (the book's sliders), nbclient also plays the
front end of its Output widget and sends a comm_msg on that same socket. jupyter_client's
``Session.send`` sends it through a synchronous shadow of the asyncio socket: libzmq then
processes the socket's pending commands, including "a message arrived", and clears its
edge-triggered file descriptor, so the event loop is never woken for the reply that is
already there. pyzmq reads it only when the poll times out (nbclient's cell timeout: 600 s
in the old test), and the cell then "passes", ten minutes late.

Here a ROUTER socket plays the kernel (no kernel is started, no TCP port: inproc). The
student copies are executed with jupyter_client's blocking client (test_classroom.py),
which polls with zmq_poll and cannot miss a message; `make outputs` uses nbclient with
:func:`attnbook.nbtools.fix_nbclient_output_widget`, whose send is checked below.
"""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace

import zmq
import zmq.asyncio
from jupyter_client.session import Session

from attnbook import nbtools

TIMEOUT = 1.5  # seconds: the poll's timeout (nbclient's cell timeout in real use)


async def _reply_seen_after(send_comm_msg) -> tuple[float, int]:
    """Seconds from arming the client's poll until it sees a reply (which arrived before a comm_msg
    was sent on the same socket)."""
    ctx = zmq.asyncio.Context()
    kernel = ctx.socket(zmq.ROUTER)
    client = ctx.socket(zmq.DEALER)
    address = f"inproc://kernel-{id(kernel)}"
    kernel.bind(address)
    client.connect(address)
    kernel_sync = zmq.Socket.shadow(kernel.underlying)
    session = Session()
    try:
        session.send(client, "execute_request", {"code": "1"})
        ident = kernel_sync.recv_multipart()[0]
        poll = asyncio.ensure_future(client.poll(int(TIMEOUT * 1000)))
        await asyncio.sleep(0)              # the poll is armed: the event loop watches the FD
        started = time.monotonic()
        kernel_sync.send_multipart([ident, b"execute_reply"])
        time.sleep(0.2)                     # the event loop is busy; the reply arrives
        send_comm_msg(session, client)      # the Output widget's state, sent back to the kernel
        ready = await poll
        return time.monotonic() - started, ready
    finally:
        client.close(linger=0)
        kernel.close(linger=0)
        ctx.term()


def upstream_send(session, client):
    """What nbclient 0.11 does: OutputWidget -> shell_channel.send -> Session.send."""
    session.send(client, "comm_msg", {"comm_id": "w", "data": {}})


def fixed_send(session, client):
    """What `make outputs` does: the fixed OutputWidget._publish_msg."""
    widget = SimpleNamespace(comm_id="w", parent_header={}, kernel_client=SimpleNamespace(
        session=session, shell_channel=SimpleNamespace(socket=client)))
    nbtools._output_widget_publish_msg(widget, "comm_msg", data={"method": "update"})


def test_a_session_send_hides_an_arrived_reply_until_the_poll_times_out():
    """The mechanism of the stall. If this fails, jupyter_client or pyzmq fixed it upstream and
    fix_nbclient_output_widget (and this test) can go."""
    waited, ready = asyncio.run(_reply_seen_after(upstream_send))
    assert ready and waited > 0.9 * TIMEOUT, f"the reply was seen after {waited:.2f} s"


def test_the_fixed_output_widget_send_wakes_the_poll():
    waited, ready = asyncio.run(_reply_seen_after(fixed_send))
    assert ready and waited < 0.6 * TIMEOUT, f"the reply was seen only after {waited:.2f} s"


def test_make_outputs_applies_the_fix():
    from nbclient import output_widget

    nbtools.fix_nbclient_output_widget()
    assert output_widget.OutputWidget._publish_msg is nbtools._output_widget_publish_msg


def test_nbval_kernels_listen_on_unix_sockets():
    """The root conftest.py gives nbval a kernel manager on Unix sockets (no TCP port that a
    kernel started at the same moment by the other worker could take); it starts and
    answers, and its socket files are gone once it is shut down."""
    import os

    import nbval.kernel

    assert nbval.kernel.KernelManager.__name__ == "IPCKernelManager"
    km, kc = nbval.kernel.start_new_kernel(kernel_name=nbval.kernel.CURRENT_ENV_KERNEL_NAME,
                                           startup_timeout=60)
    try:
        assert km.transport == "ipc" and os.path.isabs(km.ip)
        assert os.path.exists(f"{km.ip}-{km.shell_port}")
        reply = kc.execute_interactive("6 * 7", timeout=30)
        assert reply["content"]["status"] == "ok"
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    assert not os.path.exists(f"{km.ip}-{km.shell_port}")

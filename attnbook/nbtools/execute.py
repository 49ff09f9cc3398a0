"""Executing notebooks (`make outputs`) and the kernels the tests start."""

from __future__ import annotations

# --- executing notebooks (make outputs) ---

CELL_TIMEOUT = 120  # seconds per cell for `make outputs`; the slowest cell takes a few


def fix_nbclient_output_widget() -> None:
    """Make nbclient's Output-widget mimic send on the asyncio socket's own path.

    When a cell shows an ``ipywidgets.interactive`` (the book's sliders), nbclient plays
    the front end of its Output widget and sends a ``comm_msg`` on the shell socket while
    it awaits the cell's ``execute_reply`` on that same socket. jupyter_client's
    ``Session.send`` sends through a synchronous shadow of the asyncio socket; libzmq then
    processes the socket's pending commands ("a message arrived") and clears its
    edge-triggered FD, so the event loop is never woken for a reply that has already
    arrived. The reply is then read only when the poll times out (nbclient's cell timeout,
    600 s by default) and the cell "succeeds" ten minutes late. Sending with the asyncio
    socket's ``send_multipart`` lets pyzmq re-check the socket's events after the send.
    (nbclient 0.10-0.11, jupyter_client 8, pyzmq 27; see "Tests" in README.md.)
    """
    from nbclient import output_widget

    if getattr(output_widget.OutputWidget, "_attnbook_fixed", False):
        return
    output_widget.OutputWidget._publish_msg = _output_widget_publish_msg
    output_widget.OutputWidget._attnbook_fixed = True


def _output_widget_publish_msg(self, msg_type, data=None, metadata=None, buffers=None, **keys):
    """nbclient's ``OutputWidget._publish_msg``, sending with the asyncio socket's own method."""
    from nbclient.jsonutil import json_clean

    content = json_clean(dict(data={} if data is None else data, comm_id=self.comm_id, **keys))
    msg = self.kernel_client.session.msg(msg_type, content=content, parent=self.parent_header,
                                         metadata={} if metadata is None else metadata)
    frames = self.kernel_client.session.serialize(msg) + list(buffers or [])
    self.kernel_client.shell_channel.socket.send_multipart(frames)


def ipc_kernel_manager():
    """jupyter_client's KernelManager with the kernel's sockets on Unix sockets, not TCP.

    On TCP, jupyter_client picks each of a kernel's five ports by binding to port 0 and
    releasing it, and the kernel binds it a moment later; a kernel started at the same
    moment by another process can be handed the same port in between. Its client then
    talks to the other kernel, whose replies are signed with another key and ignored: the
    kernel "didn't respond in 60 seconds" (seen in `make test` once its two workers started
    chapters' kernels together). Unix sockets get unique file names instead of ports
    (in Jupyter's runtime folder, given as absolute paths: the kernel runs in the
    notebook's folder, the client elsewhere), so no two kernels can meet.
    """
    import os
    import uuid

    from jupyter_client.manager import KernelManager
    from jupyter_core.paths import jupyter_runtime_dir
    from traitlets import default

    class IPCKernelManager(KernelManager):
        @default("transport")
        def _default_transport(self):
            return "ipc"

        @default("ip")
        def _default_ip(self):
            runtime = jupyter_runtime_dir()
            os.makedirs(runtime, exist_ok=True)
            return os.path.join(runtime, f"kernel-{uuid.uuid4().hex[:16]}-ipc")

    return IPCKernelManager


def execute(notebooks, timeout: int = CELL_TIMEOUT) -> int:
    """Execute notebooks in place with nbconvert (as `jupyter nbconvert --execute --inplace`)."""
    from nbconvert.nbconvertapp import NbConvertApp

    fix_nbclient_output_widget()
    app = NbConvertApp()
    app.initialize(["--to", "notebook", "--execute", "--inplace",
                    f"--ExecutePreprocessor.timeout={timeout}",
                    "--ExecutePreprocessor.record_timing=False", *map(str, notebooks)])
    app.start()
    return 0



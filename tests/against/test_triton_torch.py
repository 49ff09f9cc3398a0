"""The Triton FlashAttention kernels (pages 17d, 17e) against torch's sdpa and the
NumPy answer key, in Triton's interpreter on the CPU (TRITON_INTERPRET=1, set by
attnbook.kernels.load_triton before triton is imported).

Shapes the pages do not show: N = 1, N not a multiple of the blocks, causal and
not, d from 16 to 64 (48 padded to 64 inside), several heads and batches. Each
comparison is float32 against float32 (sdpa) or float64 (the answer key), within
2e-5. The last tests break the kernel on purpose (a mutation of its source) and
show that the comparison catches each break: the rescale, the mask, D_i.
"""

import importlib.util
import sys
import os
from pathlib import Path

import numpy as np
import pytest

from attnbook import kernels
from attnbook import reference as ref
from optional import imports, needs

ROOT = Path(__file__).resolve().parents[2]

pytestmark = needs("torch", "triton")
_imports = imports(globals(), torch="torch", F="torch.nn.functional")

BOUND = 2e-5   # float32 kernels against float32 sdpa or the float64 answer key


def _inputs(B, H, N, d, seed=0):
    g = torch.Generator().manual_seed(seed)
    q, k, v, d_out = (torch.randn(B, H, N, d, generator=g) for _ in range(4))
    return [t.requires_grad_() for t in (q, k, v)], d_out


def _errors(B, H, N, d, causal, **blocks):
    """Largest |kernel - sdpa| of the output and of dq, dk, dv."""
    (q, k, v), d_out = _inputs(B, H, N, d)
    o = kernels.flash_attention_triton(q, k, v, causal=causal, **blocks)
    grads = torch.autograd.grad(o, (q, k, v), d_out)
    want = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    want_grads = torch.autograd.grad(want, (q, k, v), d_out)
    return {name: float((a - b).detach().abs().max()) for name, a, b in
            zip(("o", "dq", "dk", "dv"), (o, *grads), (want, *want_grads))}


# (B, H, N, d, causal, blocks, the breaks of MUTATIONS below each shape catches). Measured by
# applying each mutation to attnbook/kernels/_flash_triton.py and running these tests: the
# rescale matters only where a row spans two key tiles (not N = 1); the mask of the keys past N
# only without a causal mask (with one, keys past N lie in every real row's future anyway);
# D_i in every backward pass.
SHAPES = [
    (1, 1, 1, 16, False, {}, "mask, D_i"),                      # N = 1
    (1, 2, 1, 32, True, {}, "D_i"),                             # N = 1, causal
    (2, 3, 37, 16, True, {}, "rescale, D_i"),                   # N = 37, blocks of 32
    (2, 2, 50, 64, False, {}, "rescale, mask, D_i"),            # N = 50, d = 64
    (1, 2, 45, 48, True, {"block_q": 16, "block_k": 32}, "rescale, D_i"),  # d = 48
    (2, 1, 40, 32, True, {"block_q": 32, "block_k": 16}, "rescale, D_i"),  # Bq > Bk
]


def _id(shape):
    B, H, N, d, causal, blocks, catches = shape
    size = "x".join(map(str, blocks.values()))
    return (f"B{B}-H{H}-N{N}-d{d}-{'causal' if causal else 'full'}"
            + (f"-{size}" if size else "") + "-catches-" + catches.replace(", ", "+"))


@pytest.mark.parametrize("B, H, N, d, causal, blocks, catches", SHAPES, ids=map(_id, SHAPES))
def test_forward_and_backward_equal_sdpa(B, H, N, d, causal, blocks, catches):
    """Forward and backward against sdpa; the id names the breaks this shape catches."""
    errors = _errors(B, H, N, d, causal, **blocks)
    assert max(errors.values()) < BOUND, errors


def test_forward_and_backward_equal_the_numpy_answer_key():
    """Chapter 17's answer key, float64: the output, the log-sum-exp, the gradients.
    Catches the rescale and D_i (causal, so not the mask of the keys past N)."""
    (q, k, v), d_out = _inputs(1, 2, 27, 16, seed=1)
    o, lse = kernels.flash_attention_forward(q.detach(), k.detach(), v.detach(), causal=True,
                                             block_q=16, block_k=16)
    a = [t.detach().double().numpy() for t in (q, k, v)]
    o_ref, lse_ref = ref.flash_attention(*a, causal=True, return_lse=True)
    assert np.abs(o.numpy() - o_ref).max() < BOUND
    assert np.abs(lse.numpy() - lse_ref).max() < BOUND
    grads = kernels.flash_attention_backward(q.detach(), k.detach(), v.detach(), o, lse,
                                             d_out, causal=True, block_q=16, block_k=16)
    want = ref.flash_attention_backward(*a, o_ref, lse_ref, d_out.double().numpy(),
                                        causal=True)
    for name, g, w in zip(("dq", "dk", "dv"), grads, want):
        assert np.abs(g.numpy() - w).max() < BOUND, name


def test_half_precision_runs_and_is_close():
    """float16 in, float16 out, float32 inside: within float16's rounding. bfloat16
    is refused in the interpreter, which gets it wrong (outputs of order 1e8)."""
    (q, k, v), _ = _inputs(1, 1, 20, 16)
    q, k, v = (t.detach().half() for t in (q, k, v))
    o = kernels.flash_attention_triton(q, k, v)
    assert o.dtype == torch.float16
    want = F.scaled_dot_product_attention(q.float(), k.float(), v.float())
    assert float((o.float() - want).abs().max()) < 2e-3
    if kernels.interpreting():
        with pytest.raises(TypeError, match="bfloat16 runs on a GPU only"):
            kernels.flash_attention_triton(q.bfloat16(), k.bfloat16(), v.bfloat16())


@pytest.mark.parametrize("bad, message", [
    (lambda q: (q[0], q[0], q[0]), "(B, H, N, d)"),
    (lambda q: (q, q[:, :, :2], q), "same shape"),
    (lambda q: (q.double(), q.double(), q.double()), "float32, float16 or bfloat16"),
    (lambda q: (q, q.half(), q), "one dtype"),
    (lambda q: (q.numpy(), q, q), "torch tensor"),
])
def test_bad_inputs_get_clear_errors(bad, message):
    q = torch.zeros(1, 1, 4, 16)
    with pytest.raises((ValueError, TypeError), match=message.replace("(", r"\(")
                       .replace(")", r"\)")):
        kernels.flash_attention_triton(*bad(q))


def test_bad_blocks_and_flags_get_clear_errors():
    q = torch.zeros(1, 1, 4, 16)
    with pytest.raises(ValueError, match="power of two, at least 16"):
        kernels.flash_attention_triton(q, q, q, block_q=24)
    with pytest.raises(TypeError, match="causal must be True or False"):
        kernels.flash_attention_triton(q, q, q, causal=1)


# --- breaking the kernel on purpose: each break makes the comparison fail ---

KERNEL_SOURCE = Path(kernels.__file__).with_name("_flash_triton.py")

MUTATIONS = {
    # the rescale applied to l but not to the accumulator
    "rescale": ("acc = acc * alpha[:, None] + tl.dot(", "acc = acc + tl.dot("),
    # the keys past the end of the last block not masked out of the scores
    "mask": ("keep = keys[None, :] < N\n", "keep = keys[None, :] >= 0\n"),
    # D_i from dO alone
    "D_i": ("tl.sum(do.to(tl.float32) * o.to(tl.float32), 1)",
            "tl.sum(do.to(tl.float32), 1)"),
}


@pytest.mark.parametrize("break_", sorted(MUTATIONS))
def test_a_broken_kernel_fails_the_comparison(break_, tmp_path, monkeypatch):
    """Each break, applied to a copy of the kernels, fails the comparison of
    test_forward_and_backward_equal_sdpa on one shape, in the parts it should."""
    old, new = MUTATIONS[break_]
    source = KERNEL_SOURCE.read_text(encoding="utf-8")
    assert source.count(old) == 1, f"the kernel changed: update the {break_} mutation"
    path = tmp_path / f"_flash_broken_{break_.lower()}.py"
    path.write_text(source.replace(old, new), encoding="utf-8")
    kernels.load_triton()
    spec = importlib.util.spec_from_file_location(path.stem, path)
    broken = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = broken
    spec.loader.exec_module(broken)
    monkeypatch.setattr(kernels, "_kernels", lambda: broken)
    # N = 37, blocks of 16: three key tiles, the last partial
    errors = _errors(1, 1, 37, 16, False, block_q=16, block_k=16)
    caught = [name for name, e in errors.items() if e > BOUND]
    expected = {"rescale": ["o", "dq", "dk"], "mask": ["o", "dq", "dk", "dv"],
                "D_i": ["dq", "dk"]}[break_]
    assert caught == expected, errors


def test_triton_imported_first_without_the_interpreter_gets_a_clear_error():
    """transformers imports triton to see whether it is there. Without a GPU, a process that
    imported triton before TRITON_INTERPRET=1 cannot run the kernels at all (triton.language
    was built for the GPU): the kernels say so, instead of a puzzling Triton error."""
    import subprocess
    import sys

    if Path("/dev/nvidiactl").exists():
        pytest.skip("a GPU machine: there the kernels are compiled, not interpreted")
    code = ("import triton, torch\nfrom attnbook import kernels\nq = torch.zeros(1, 1, 4, 16)\n"
            "kernels.flash_attention_triton(q, q, q)\n")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=300)
    assert proc.returncode != 0
    assert "triton was imported before TRITON_INTERPRET=1 was set" in proc.stderr, proc.stderr

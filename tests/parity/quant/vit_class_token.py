#!/usr/bin/python3
"""PyTorch 1.13's own int8 on a small ViT-style model (4 blocks, width 64, 4x4 patches of
8x8 pixels plus a class token, the head reading only the class token), its class token
zero as torchvision's vit_b_16 initialises it, then N(0, 1): the output SQNR of
convert_to_reference_fx (x86 BackendConfig, onednn qconfig mapping, 8 random calibration
images) against float. A diagnostic for docs/models.md ("Why vit_b_16 int8 is 7.7 dB"),
not a test: it asserts nothing.

The position-embedding Add is quantized per tensor like every other add; with a zero class
token its row is pos_embedding[0] (std 0.02) next to patch tokens of order 1, a few
quantization steps, and the head reads only that row."""
import torch, torch.nn as nn, torch.nn.functional as F
from torch.ao.quantization import get_default_qconfig_mapping
from torch.ao.quantization.quantize_fx import prepare_fx, convert_to_reference_fx
from torch.ao.quantization.backend_config.x86 import get_x86_backend_config
torch.manual_seed(0)

class Block(nn.Module):
    def __init__(s, d, h):
        super().__init__(); s.h = h; s.ln1 = nn.LayerNorm(d); s.ln2 = nn.LayerNorm(d)
        s.qkv = nn.Linear(d, 3 * d); s.proj = nn.Linear(d, d); s.fc1 = nn.Linear(d, 4 * d); s.fc2 = nn.Linear(4 * d, d)
    def forward(s, x):
        b, n, d = x.shape[0], 17, 64
        t = s.qkv(s.ln1(x)).reshape(b, n, 3, s.h, d // s.h).permute(2, 0, 3, 1, 4)
        q, k, v = t[0], t[1], t[2]
        a = F.softmax(torch.matmul(q, k.transpose(-2, -1)) * (d // s.h) ** -0.5, dim=-1)
        x = x + s.proj(torch.matmul(a, v).transpose(1, 2).reshape(b, n, d))
        return x + s.fc2(F.gelu(s.fc1(s.ln2(x))))

class ViT(nn.Module):
    def __init__(s, zero_cls):
        super().__init__()
        s.patch = nn.Conv2d(3, 64, 8, 8)
        s.cls = nn.Parameter(torch.zeros(1, 1, 64) if zero_cls else torch.randn(1, 1, 64))
        s.pos = nn.Parameter(torch.empty(1, 17, 64).normal_(std=0.02))
        s.blocks = nn.Sequential(*[Block(64, 4) for _ in range(4)]); s.ln = nn.LayerNorm(64)
        s.head = nn.Linear(64, 10); nn.init.normal_(s.head.weight, std=0.02)
    def forward(s, x):
        x = s.patch(x).flatten(2).transpose(1, 2)
        x = torch.cat([s.cls.expand(x.shape[0], -1, -1), x], dim=1) + s.pos
        return s.head(s.ln(s.blocks(x))[:, 0])

def sqnr(a, b): return (10 * torch.log10(a.pow(2).sum() / (a - b).pow(2).sum())).item()
calib = torch.randn(8, 3, 32, 32); x = torch.randn(4, 3, 32, 32)
for zero in (True, False):
    m = ViT(zero).eval()
    p = prepare_fx(m, get_default_qconfig_mapping("onednn"), example_inputs=(x,), backend_config=get_x86_backend_config())
    with torch.no_grad():
        p(calib)
    r = convert_to_reference_fx(p, backend_config=get_x86_backend_config())
    with torch.no_grad():
        f, q = m(x), r(x)
        # the class token row after the position add, float vs the reference model's
    add_q = [n for n in r.graph.nodes if n.op == "call_function" and "quantize_per_tensor" in str(n.target)
             and any(a.op == "call_function" and a.target in (torch.add, __import__("operator").add) for a in n.args if hasattr(a, "op"))]
    print(f"class token {'zeros' if zero else 'N(0,1)'}: output SQNR of convert_to_reference_fx vs float {sqnr(f, q):.2f} dB; "
          f"quantized adds: {len(add_q)}")

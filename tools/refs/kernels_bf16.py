"""References for kernels/bf16.h: f32 -> bf16 rounding as torch's .bfloat16() does it (round to
nearest, ties to even). Inputs cover exact bf16 values, ties in both directions, values just off a
tie, f32 and bf16 subnormals, the overflow to inf at the top of the range, +-0, +-inf and NaNs, plus
random normals. Every NaN becomes 0xFFFF: torch's tensor conversion (its vectorised
path) writes that, where c10::BFloat16's scalar constructor would write 0x7FC0. Stored: x (f32)
and the bf16 bit patterns (as int32 in 0..65535)."""
import torch
from qkvref import Refs


def main(out):
    bits = [
        0x3F800000, 0xBF800000, 0x00000000, 0x80000000,  # 1, -1, +-0
        0x3F808000, 0x3F818000, 0xBF808000, 0xBF818000,  # ties: to even down (1.0), to even up
        0x3F808001, 0x3F807FFF, 0x3F818001, 0x3F817FFF,  # just above / below the ties
        0x00000001, 0x00008000, 0x00018000, 0x00010000, 0x807FFFFF, 0x00400000,  # f32 subnormals
        0x00800000, 0x00FF8000, 0x80FF8000,  # smallest normal, ties at the bottom of the normals
        0x7F7FFFFF, 0x7F7F8000, 0x7F7F7FFF, 0xFF7FFFFF,  # overflow to inf, a tie there, the largest finite
        0x7F800000, 0xFF800000,  # +-inf
        0x7FC00000, 0xFFC00000, 0x7F800001, 0x7FBFFFFF, 0xFFFFFFFF,  # quiet, negative, signalling NaNs
    ]
    # The bits exactly (Python floats would not keep NaN payloads).
    special = torch.tensor([b if b < 2**31 else b - 2**32 for b in bits], dtype=torch.int32).view(torch.float32)
    g = torch.Generator().manual_seed(16)
    rand = torch.cat([torch.randn(4096, generator=g) * 10.0 ** torch.randint(-40, 38, (4096,), generator=g),
                      torch.randn(1000, generator=g)]).float()
    r = Refs()
    for name, x in (("special", special), ("random", rand)):
        y = x.bfloat16().view(torch.int16).to(torch.int32) & 0xFFFF
        r.case(name, {}, x=x, bf16_bits=y)
    r.save(out)

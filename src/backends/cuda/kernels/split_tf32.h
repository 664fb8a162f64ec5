// 3xTF32 (float32's accuracy on the TF32 tensor cores) as one TF32 product over three times the
// reduction: x = big + small, big = x rounded to TF32 (cvt.rna), small = x - big (exact in float32;
// the tensor cores read its upper 19 bits, 2^-21 of x at most lost), and
//   A B = Ab Bb + Ab Bs + As Bb     (As Bs is below float32's rounding)
// is the product of A' = [Ab | Ab | As] and B' = [Bb; Bs; Bb] along the reduced axis, which a
// library's TF32 kernels run in one call with its epilogue: gemm.cu (INGOT_GEMM_3XTF32) for matrix
// products, conv.cu (INGOT_CONV_3XTF32) for convolutions, whose input channels are the reduced
// axis. CUTLASS's 3xTF32; the float32 flash attention runs the same terms in its own kernel.
#pragma once
#include <cstdint>

namespace ingot::cuda {

// Parts as 2 bits each, low bits first: 0 big, 1 small, 2 big with Inf and NaN as 0. The copy of
// big that multiplies the other operand's small part holds no Inf: Inf times a small part of the
// opposite sign would add -Inf to Inf (NaN) where the exact product is Inf. Inf and NaN stay in big
// (small 0); a finite x whose TF32 rounding overflows keeps its truncation as big.
constexpr unsigned kSplitA = 0b01'10'00;  // [Ab | Ab (finite) | As]
constexpr unsigned kSplitB = 0b10'01'00;  // [Bb; Bs; Bb (finite)]

// y[o][p c + ch][i] = part p of x[o ld_outer + ch ld_c + i] for o < outer, ch < c, i < inner,
// p < 3: x viewed as [outer, c, inner] (inner contiguous), y contiguous [outer, 3 c, inner]. On
// stream().
void split_tf32_operand(const float* x, float* y, int64_t outer, int64_t ld_outer, int64_t c, int64_t ld_c, int64_t inner,
                unsigned order);

// Convolutions run as 3xTF32 (INGOT_CONV_3XTF32, conv.cu) in this process (tests).
int64_t split_tf32_convs();

}  // namespace ingot::cuda

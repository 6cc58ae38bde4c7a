//===- AttentionCopies.cu - bf16 copies for cuDNN's fused attention -------===//
//
// The element-wise kernels around a fused-attention call (FusedAttention.cpp):
// f32 tables into columns of a bf16 matrix and back, and the statistics
// scaled into a contraction's normalisers. One thread per element written;
// every parameter is an 8-byte value, the last one the count of positions.
//
//===----------------------------------------------------------------------===//

#include <cuda_bf16.h>
#include <stdint.h>

/// Columns [offset, offset + width) of the rows of `packed` (bf16, `stride`
/// elements a row) from the rows of `source` (f32, `width` a row), or
/// zeros where `source` is null: `count` = rows × width elements.
extern "C" __global__ void
energy_attention_pack_bf16(const float *source, int64_t width,
                           __nv_bfloat16 *packed, int64_t stride,
                           int64_t offset, int64_t count) {
  int64_t position = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (position >= count)
    return;
  int64_t row = position / width, column = position % width;
  float value = source ? source[position] : 0.0f;
  packed[row * stride + offset + column] = __float2bfloat16_rn(value);
}

/// The rows of `target` (f32, `width` a row) from columns [offset, offset +
/// width) of the rows of `packed` (bf16, `stride` elements a row).
extern "C" __global__ void
energy_attention_unpack_bf16(const __nv_bfloat16 *packed, int64_t stride,
                             int64_t offset, float *target, int64_t width,
                             int64_t count) {
  int64_t position = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (position >= count)
    return;
  int64_t row = position / width, column = position % width;
  target[position] = __bfloat162float(packed[row * stride + offset + column]);
}

/// target = factor · source, `count` floats (the normalisers T · stats).
extern "C" __global__ void energy_attention_scale_f32(const float *source,
                                                      double factor,
                                                      float *target,
                                                      int64_t count) {
  int64_t position = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (position < count)
    target[position] = float(factor * double(source[position]));
}

#include <ingot/dtype.h>
#include <ingot/error.h>

#include <string>

namespace ingot {

size_t dtype_size(DType dt) {
  switch (dt) {
    case DType::Float32:
    case DType::Int32:
    case DType::UInt32: return 4;
    case DType::Float64:
    case DType::Int64:
    case DType::UInt64: return 8;
    case DType::Float16:
    case DType::BFloat16:
    case DType::Int16:
    case DType::UInt16: return 2;
    case DType::Int8:
    case DType::UInt8:
    case DType::Bool: return 1;
    case DType::String: return sizeof(std::string);
    case DType::Undefined: return 0;
  }
  return 0;
}

std::string_view dtype_name(DType dt) {
  switch (dt) {
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
    case DType::Float16: return "float16";
    case DType::BFloat16: return "bfloat16";
    case DType::Int8: return "int8";
    case DType::Int16: return "int16";
    case DType::Int32: return "int32";
    case DType::Int64: return "int64";
    case DType::UInt8: return "uint8";
    case DType::UInt16: return "uint16";
    case DType::UInt32: return "uint32";
    case DType::UInt64: return "uint64";
    case DType::Bool: return "bool";
    case DType::String: return "string";
    case DType::Undefined: return "undefined";
  }
  return "invalid";
}

DType dtype_from_name(std::string_view name) {
  for (DType dt :
       {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16, DType::Int8, DType::Int16, DType::Int32,
        DType::Int64, DType::UInt8, DType::UInt16, DType::UInt32, DType::UInt64, DType::Bool, DType::String}) {
    if (dtype_name(dt) == name) return dt;
  }
  return DType::Undefined;
}

bool is_floating(DType dt) {
  return dt == DType::Float32 || dt == DType::Float64 || dt == DType::Float16 || dt == DType::BFloat16;
}

bool is_integral(DType dt) {
  switch (dt) {
    case DType::Int8:
    case DType::Int16:
    case DType::Int32:
    case DType::Int64:
    case DType::UInt8:
    case DType::UInt16:
    case DType::UInt32:
    case DType::UInt64: return true;
    default: return false;
  }
}

bool is_signed(DType dt) {
  return is_floating(dt) || dt == DType::Int8 || dt == DType::Int16 || dt == DType::Int32 || dt == DType::Int64;
}

// IEEE half conversions with round-to-nearest-even, subnormals, Inf and NaN.
float half_to_float(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalize
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400) == 0);
      bits = sign | uint32_t(127 - 15 - e) << 23 | (mant & 0x3ff) << 13;
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | mant << 13;
  } else {
    bits = sign | (exp + 127 - 15) << 23 | mant << 13;
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000;
  uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) return uint16_t(sign | 0x7e00);   // NaN
  if (abs >= 0x477ff000u) return uint16_t(sign | 0x7c00);  // overflow (after rounding) -> Inf
  if (abs < 0x38800000u) {                                 // below half's smallest normal
    if (abs < 0x33000000u) return uint16_t(sign);          // under half the smallest subnormal
    // value = m * 2^(e-150); in units of half's subnormal step 2^-24 that is m >> (126 - e).
    uint32_t e = abs >> 23;
    uint32_t m = (abs & 0x7fffff) | 0x800000;
    uint32_t shift = 126 - e;
    uint32_t half_m = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1);
    uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (half_m & 1))) ++half_m;
    return uint16_t(sign | half_m);
  }
  uint32_t h = ((abs >> 13) - ((127 - 15) << 10));
  uint32_t rem = abs & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) ++h;
  return uint16_t(sign | h);
}

}  // namespace ingot

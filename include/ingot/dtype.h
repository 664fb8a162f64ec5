// Element types. Values equal ONNX TensorProto.DataType so files and the importer map 1:1;
// the enum is append-only because packages store it.
#pragma once
#include <ingot/export.h>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

INGOT_API_BEGIN
namespace ingot {

enum class DType : uint8_t {
  Undefined = 0,
  Float32 = 1,
  UInt8 = 2,
  Int8 = 3,
  UInt16 = 4,
  Int16 = 5,
  Int32 = 6,
  Int64 = 7,
  String = 8,
  Bool = 9,
  Float16 = 10,
  Float64 = 11,
  UInt32 = 12,
  UInt64 = 13,
  BFloat16 = 16,
};

size_t dtype_size(DType dt);                   // bytes per element (sizeof(std::string) for String)
std::string_view dtype_name(DType dt);         // "float32", "int64", ...
DType dtype_from_name(std::string_view name);  // inverse of dtype_name; Undefined if unknown
bool is_floating(DType dt);                    // float16/bfloat16/float32/float64
bool is_integral(DType dt);                    // signed and unsigned integers (not bool)
bool is_signed(DType dt);

float half_to_float(uint16_t h);
uint16_t float_to_half(float f);

// IEEE binary16. Arithmetic happens in float through the implicit conversions.
struct Half {
  uint16_t bits = 0;
  Half() = default;
  Half(float f) : bits(float_to_half(f)) {}  // NOLINT: implicit on purpose
  operator float() const { return half_to_float(bits); }
  static Half from_bits(uint16_t b) {
    Half h;
    h.bits = b;
    return h;
  }
};

// bfloat16: the upper half of a float32, rounded to nearest even.
struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  BFloat16(float f) {  // NOLINT
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
      bits = uint16_t((u >> 16) | 0x40);  // quiet NaN
    } else {
      u += 0x7fffu + ((u >> 16) & 1u);
      bits = uint16_t(u >> 16);
    }
  }
  operator float() const {
    uint32_t u = uint32_t(bits) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  static BFloat16 from_bits(uint16_t b) {
    BFloat16 h;
    h.bits = b;
    return h;
  }
};

template <DType D>
struct dtype_traits;
#define INGOT_DTYPE_TRAIT(D, T)   \
  template <>                     \
  struct dtype_traits<DType::D> { \
    using type = T;               \
  };
INGOT_DTYPE_TRAIT(Float32, float)
INGOT_DTYPE_TRAIT(Float64, double)
INGOT_DTYPE_TRAIT(Float16, Half)
INGOT_DTYPE_TRAIT(BFloat16, BFloat16)
INGOT_DTYPE_TRAIT(Int8, int8_t)
INGOT_DTYPE_TRAIT(Int16, int16_t)
INGOT_DTYPE_TRAIT(Int32, int32_t)
INGOT_DTYPE_TRAIT(Int64, int64_t)
INGOT_DTYPE_TRAIT(UInt8, uint8_t)
INGOT_DTYPE_TRAIT(UInt16, uint16_t)
INGOT_DTYPE_TRAIT(UInt32, uint32_t)
INGOT_DTYPE_TRAIT(UInt64, uint64_t)
INGOT_DTYPE_TRAIT(Bool, bool)
INGOT_DTYPE_TRAIT(String, std::string)
#undef INGOT_DTYPE_TRAIT

template <class T>
constexpr DType dtype_of();
#define INGOT_DTYPE_OF(T, D)      \
  template <>                     \
  constexpr DType dtype_of<T>() { \
    return DType::D;              \
  }
INGOT_DTYPE_OF(float, Float32)
INGOT_DTYPE_OF(double, Float64)
INGOT_DTYPE_OF(Half, Float16)
INGOT_DTYPE_OF(BFloat16, BFloat16)
INGOT_DTYPE_OF(int8_t, Int8)
INGOT_DTYPE_OF(int16_t, Int16)
INGOT_DTYPE_OF(int32_t, Int32)
INGOT_DTYPE_OF(int64_t, Int64)
INGOT_DTYPE_OF(uint8_t, UInt8)
INGOT_DTYPE_OF(uint16_t, UInt16)
INGOT_DTYPE_OF(uint32_t, UInt32)
INGOT_DTYPE_OF(uint64_t, UInt64)
INGOT_DTYPE_OF(bool, Bool)
INGOT_DTYPE_OF(std::string, String)
#undef INGOT_DTYPE_OF

}  // namespace ingot
INGOT_API_END

// Compile-time dispatch from a runtime DType to a templated body:
//   dispatch<DType::Float32, DType::Float64>(dt, [&]<class T>() { ... });
// Unsupported dtypes throw an ingot::Error naming the dtype; the executor adds the node.
#pragma once
#include <ingot/dtype.h>
#include <ingot/error.h>

#include <type_traits>

namespace ingot {

template <DType... Ds, class F>
void dispatch(DType dt, F&& f) {
  bool done = ((dt == Ds ? (f.template operator()<typename dtype_traits<Ds>::type>(), true) : false) || ...);
  if (!done) fail("dtype {} is not supported here", dtype_name(dt));
}

#define INGOT_FLOAT_TYPES DType::Float32, DType::Float64, DType::Float16, DType::BFloat16
#define INGOT_INT_TYPES \
  DType::Int8, DType::Int16, DType::Int32, DType::Int64, DType::UInt8, DType::UInt16, DType::UInt32, DType::UInt64
#define INGOT_NUMERIC_TYPES INGOT_FLOAT_TYPES, INGOT_INT_TYPES
#define INGOT_ALL_TYPES INGOT_NUMERIC_TYPES, DType::Bool, DType::String

template <class F>
void dispatch_float(DType dt, F&& f) {
  dispatch<INGOT_FLOAT_TYPES>(dt, std::forward<F>(f));
}
template <class F>
void dispatch_int(DType dt, F&& f) {
  dispatch<INGOT_INT_TYPES>(dt, std::forward<F>(f));
}
template <class F>
void dispatch_numeric(DType dt, F&& f) {
  dispatch<INGOT_NUMERIC_TYPES>(dt, std::forward<F>(f));
}
template <class F>
void dispatch_numeric_bool(DType dt, F&& f) {
  dispatch<INGOT_NUMERIC_TYPES, DType::Bool>(dt, std::forward<F>(f));
}
template <class F>
void dispatch_all(DType dt, F&& f) {
  dispatch<INGOT_ALL_TYPES>(dt, std::forward<F>(f));
}

// double -> element type T (of any numeric dtype); Half and BFloat16 convert through float.
template <class T>
T from_double(double v) {
  if constexpr (std::is_arithmetic_v<T>) {
    return T(v);
  } else {
    return T(float(v));
  }
}

// Element-size dispatch for ops that only move data (Transpose, Gather, Concat...).
template <class F>
void dispatch_by_size(DType dt, F&& f) {
  switch (dt) {
    case DType::String: f.template operator()<std::string>(); break;
    case DType::Bool:
    case DType::Int8:
    case DType::UInt8: f.template operator()<uint8_t>(); break;
    case DType::Int16:
    case DType::UInt16:
    case DType::Float16:
    case DType::BFloat16: f.template operator()<uint16_t>(); break;
    case DType::Int32:
    case DType::UInt32:
    case DType::Float32: f.template operator()<uint32_t>(); break;
    case DType::Int64:
    case DType::UInt64:
    case DType::Float64: f.template operator()<uint64_t>(); break;
    default: fail("dtype {} is not supported here", dtype_name(dt));
  }
}

}  // namespace ingot

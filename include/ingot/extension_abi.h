/* Ingot's extension ABI: how a library of user ops talks to Ingot. Plain C, versioned, with no
 * dependency on Ingot's C++ types (ONNX Runtime's OrtCustomOp is the model): an extension built
 * against version N loads into every Ingot whose INGOT_EXTENSION_ABI_VERSION is >= N, whatever
 * compiler or C++ standard library either was built with. Extension authors normally use the C++
 * wrapper <ingot/extension.h>; docs/CUSTOM_OPS.md walks through both.
 *
 * A library exports two functions:
 *   uint32_t ingot_extension_abi_version(void);      returns the INGOT_EXTENSION_ABI_VERSION it was built with
 *   int32_t  ingot_extension_init(const IngotApi* api, IngotRegistrar* registrar);
 * Ingot calls init once after loading the library; it registers each op with api->register_op and
 * returns 0, or sets an error (api->registrar_error) and returns non-zero.
 *
 * Rules of the road:
 *  - Nothing Ingot hands out outlives the call it was handed out in (tensors, names, attribute
 *    values); everything an op description points to is copied by register_op.
 *  - No C++ exception may cross the ABI: a kernel reports failure with api->kernel_error and a
 *    non-zero return (the C++ wrapper does this for exceptions thrown in kernels).
 *  - Tensors are dense and row-major; dtypes are ONNX's TensorProto codes.
 *  - A CUDA kernel runs on api->cuda_stream(ctx) and never synchronizes the device.
 * The table below only grows: new entries are appended and abi_version is raised. */
#ifndef INGOT_EXTENSION_ABI_H
#define INGOT_EXTENSION_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define INGOT_EXTENSION_ABI_VERSION 1

/* Element types: ONNX TensorProto codes. */
enum IngotDType {
  INGOT_DTYPE_FLOAT32 = 1,
  INGOT_DTYPE_UINT8 = 2,
  INGOT_DTYPE_INT8 = 3,
  INGOT_DTYPE_UINT16 = 4,
  INGOT_DTYPE_INT16 = 5,
  INGOT_DTYPE_INT32 = 6,
  INGOT_DTYPE_INT64 = 7,
  INGOT_DTYPE_BOOL = 9,
  INGOT_DTYPE_FLOAT16 = 10,
  INGOT_DTYPE_FLOAT64 = 11,
  INGOT_DTYPE_UINT32 = 12,
  INGOT_DTYPE_UINT64 = 13,
  INGOT_DTYPE_BFLOAT16 = 16
};

enum IngotDeviceType { INGOT_DEVICE_CPU = 0, INGOT_DEVICE_CUDA = 1 };

/* Attribute kinds (the subset of ONNX's that extensions declare). */
enum IngotAttrKind {
  INGOT_ATTR_INT = 0,
  INGOT_ATTR_FLOAT = 1,
  INGOT_ATTR_STRING = 2,
  INGOT_ATTR_INTS = 5,
  INGOT_ATTR_FLOATS = 6
};

/* A tensor as a kernel sees it: valid until the kernel returns. */
typedef struct IngotTensor {
  void* data; /* device memory for a CUDA tensor */
  const int64_t* shape;
  int32_t rank;
  int32_t dtype;       /* IngotDType */
  int32_t device_type; /* IngotDeviceType */
  int32_t device_index;
} IngotTensor;

/* The static type of a value during shape inference: dims[i] < 0 is an unknown size; rank < 0 an
 * unknown rank; dtype 0 an unknown dtype. */
typedef struct IngotValueType {
  int32_t dtype;
  int32_t rank;
  const int64_t* dims;
} IngotValueType;

typedef struct IngotKernelContext IngotKernelContext;
typedef struct IngotShapeContext IngotShapeContext;
typedef struct IngotRegistrar IngotRegistrar;
typedef struct IngotAttributes IngotAttributes;
typedef struct IngotApi IngotApi;

/* A kernel: 0 on success; otherwise it has called api->kernel_error. `user` is the op's user_data. */
typedef int32_t (*IngotKernelFn)(const IngotApi* api, IngotKernelContext* ctx, void* user);
/* Output types from input types and attributes: sets each output with api->shape_set_output.
 * 0 on success; otherwise it has called api->shape_error. */
typedef int32_t (*IngotShapeFn)(const IngotApi* api, IngotShapeContext* ctx, void* user);

typedef struct IngotAttrDesc {
  const char* name;
  int32_t kind;      /* IngotAttrKind */
  int32_t required;  /* non-zero: no default; a node without it is refused */
  int64_t default_int;
  float default_float;
  const char* default_string; /* lists default to empty */
} IngotAttrDesc;

typedef struct IngotTypeDesc {
  const char* name;     /* a type variable ("T") that inputs and outputs name */
  const int32_t* dtypes; /* the IngotDTypes it allows */
  int32_t num_dtypes;
} IngotTypeDesc;

typedef struct IngotOpDesc {
  const char* domain; /* the op's own domain ("my.ops"); ONNX's and Ingot's domains are refused */
  const char* name;
  int32_t since_version; /* opset version of `domain` from which the op exists (usually 1) */
  const char* summary;

  int32_t num_inputs;
  const char* const* input_names;
  const char* const* input_types;   /* type variable of each input */
  const int32_t* input_optional;    /* non-zero: may be omitted; NULL: none optional */
  int32_t num_outputs;
  const char* const* output_names;
  const char* const* output_types;
  int32_t num_types;
  const IngotTypeDesc* types;
  int32_t num_attrs;
  const IngotAttrDesc* attrs;

  /* Output types for graphs (ONNX models, packages, traced functions). NULL: each output has
   * input 0's type. Kernels compute exact shapes at run time either way. */
  IngotShapeFn infer;
  void* infer_user;
  /* The kernels; either may be NULL (the op then runs on the other device, reported as a fallback). */
  IngotKernelFn cpu_kernel;
  void* cpu_user;
  IngotKernelFn cuda_kernel;
  void* cuda_user;
  /* The op's gradient, NULL for none: an op of the same domain whose inputs are this op's inputs,
   * then its outputs, then the cotangent of each output (zeros where none flows), and whose outputs
   * are the gradient of each input (zeros for inputs without one); it gets the forward node's
   * attributes. It may have a gradient op of its own (second order). */
  const char* gradient_op;
} IngotOpDesc;

struct IngotApi {
  uint32_t abi_version; /* INGOT_EXTENSION_ABI_VERSION of the Ingot that loaded the library */
  const char* ingot_version;

  /* ---- registration (inside ingot_extension_init) */
  int32_t (*register_op)(IngotRegistrar* registrar, const IngotOpDesc* op);
  void (*registrar_error)(IngotRegistrar* registrar, const char* message);

  /* ---- kernels */
  int32_t (*num_inputs)(const IngotKernelContext* ctx);
  int32_t (*num_outputs)(const IngotKernelContext* ctx);
  /* Input i; 0 on success, non-zero when it was omitted. */
  int32_t (*input)(const IngotKernelContext* ctx, int32_t i, IngotTensor* out);
  /* Allocates output i on the kernel's device; 0 on success (else the context holds the error). */
  int32_t (*allocate_output)(IngotKernelContext* ctx, int32_t i, int32_t dtype, const int64_t* shape, int32_t rank,
                             IngotTensor* out);
  const IngotAttributes* (*kernel_attributes)(const IngotKernelContext* ctx);
  /* The stream the kernel's work goes on (a cudaStream_t for CUDA kernels; NULL on the CPU). */
  void* (*cuda_stream)(const IngotKernelContext* ctx);
  /* Runs fn(begin, end, arg) over [0, n) in chunks of at least `grain` on Ingot's CPU threads. */
  void (*parallel_for)(int64_t n, int64_t grain, void (*fn)(int64_t begin, int64_t end, void* arg), void* arg);
  void (*kernel_error)(IngotKernelContext* ctx, const char* message);

  /* ---- attributes: the node's value, else the declared default. 0 on success; non-zero when the
   * name is not declared or has another kind. Strings and lists stay valid for the call. */
  int32_t (*attr_int)(const IngotAttributes* attrs, const char* name, int64_t* out);
  int32_t (*attr_float)(const IngotAttributes* attrs, const char* name, float* out);
  int32_t (*attr_string)(const IngotAttributes* attrs, const char* name, const char** out, size_t* size);
  int32_t (*attr_ints)(const IngotAttributes* attrs, const char* name, const int64_t** out, size_t* count);
  int32_t (*attr_floats)(const IngotAttributes* attrs, const char* name, const float** out, size_t* count);

  /* ---- shape inference */
  int32_t (*shape_num_inputs)(const IngotShapeContext* ctx);
  int32_t (*shape_num_outputs)(const IngotShapeContext* ctx);
  /* Input i's type; non-zero when it was omitted. */
  int32_t (*shape_input)(const IngotShapeContext* ctx, int32_t i, IngotValueType* out);
  const IngotAttributes* (*shape_attributes)(const IngotShapeContext* ctx);
  void (*shape_set_output)(IngotShapeContext* ctx, int32_t i, const IngotValueType* type);
  void (*shape_error)(IngotShapeContext* ctx, const char* message);
};

/* What the library exports. */
uint32_t ingot_extension_abi_version(void);
int32_t ingot_extension_init(const IngotApi* api, IngotRegistrar* registrar);

#ifdef __cplusplus
}
#endif

#endif /* INGOT_EXTENSION_ABI_H */

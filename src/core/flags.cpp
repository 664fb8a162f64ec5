#include "core/flags.h"

#include <ingot/error.h>

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace ingot::flags {
namespace {

// Every switch the library reads. Keep the help to what a user needs to decide to set it.
constexpr Flag kFlags[] = {
    // Passes and placement
    {"INGOT_DISABLE_PASSES", Kind::List, "",
     "Compile passes to skip, by name (`ingot inspect --passes` lists them; also channels-last): A/B runs, "
     "bisecting a pass that breaks a model."},
    {"INGOT_CHANNELS_LAST", Kind::Bool, "0",
     "Also convert float32 models to channels-last for CUDA (16-bit ones always are): an experiment switch."},
    {"INGOT_HIDE_CUDA_KERNELS", Kind::List, "",
     "Ops whose CUDA kernels are hidden, forcing CPU fallbacks (a test switch).", true},
    // Data-parallel training (include/ingot/distributed.h)
    {"INGOT_RENDEZVOUS", Kind::Text, "",
     "Where the processes of a data-parallel group meet: file:///folder (`ingot launch` sets it, with RANK and "
     "WORLD_SIZE).", true},
    {"INGOT_GLOO_PLUGIN", Kind::Text, "",
     "The path of libingot_gloo.so (the gloo backend's plugin) when it is not beside the library or program.", true},
    // CUDA backend
    {"INGOT_NO_NVRTC", Kind::Bool, "0",
     "Do not generate fused elementwise kernels with NVRTC; run their precompiled interpreter instead."},
    {"INGOT_EXIT_TEARDOWN", Kind::Bool, "0",
     "ingot CLI: leave through static destructors and the CUDA libraries' teardown (0: flush the output, then "
     "_Exit; the OS frees the process: 38-94 ms sooner with fp32 packages on the H200; sanitizer builds always tear down)."},
    {"INGOT_CUDA_EARLY_START", Kind::Bool, "1",
     "Create the CUDA context on a thread of its own while a session reads its model (0: on the device's first "
     "use)."},
    {"INGOT_CUDNN_PREBUILD", Kind::Int, "1",
     "How many threads build a loaded package's stored cuDNN convolution plans while the CUDA context starts and "
     "the first run goes on (0: each convolution builds its own on first use; docs/PERFORMANCE.md, cold start)."},
    {"INGOT_CUBLASLT_WARMUP", Kind::Bool, "1",
     "Run a loaded package's stored cuBLASLt products once on scratch buffers on a thread of their own once the "
     "CUDA context exists, so that their kernels load beside the cold start (0: on their first call)."},
    {"INGOT_CUDNN_WARMUP", Kind::Bool, "0",
     "Run each cuDNN plan built ahead (INGOT_CUDNN_PREBUILD) once on scratch buffers on the building thread, so "
     "that CUDA loads its kernels there rather than in the first run (an A/B switch: docs/PERFORMANCE.md, cold "
     "start)."},
    {"INGOT_CUDNN_PRELOAD", Kind::Bool, "1",
     "Open the cuDNN sub-libraries a loaded package's stored choices need while the CUDA driver starts (0: cuDNN "
     "opens them at the first convolution)."},
    {"INGOT_CUDNN_SERIALIZED_PLANS", Kind::Bool, "1",
     "Store cuDNN's serialized execution plans beside the convolution choices a search makes (runtime-compiled "
     "engines: with their compiled kernel) and load them instead of compiling again (ResNet-50 fp16 package on "
     "the H200: first output 1,436 -> 604 ms; docs/PERFORMANCE.md, cold start).",
     true},
    {"INGOT_CUDNN_GRAPH", Kind::Bool, "1",
     "Use cuDNN's graph API for fused convolutions (0: the legacy convolution API only)."},
    {"INGOT_FLASH_ATTENTION", Kind::Bool, "1", "Use Ingot's flash attention kernel (0: the materialized path)."},
    {"INGOT_CUDNN_ATTENTION", Kind::Bool, "1",
     "Run 16-bit attention without a mask through cuDNN's fused flash-attention engines where one takes it (0: "
     "Ingot's own flash kernel).",
     true},
    {"INGOT_UPLOAD_AHEAD", Kind::Bool, "1",
     "A package loaded for a GPU copies its weights to the device on a thread of its own, in the order the first run "
     "reads them, while the first run goes on (0: each weight on its first use, in the run).",
     true},
    {"INGOT_CUDA_COLD_KERNELS", Kind::Int, "1",
     "CUDA convolutions and matrix products whose cuDNN plan or cuBLASLt kernel is still being prepared in the "
     "background run on Ingot's own tiled kernel instead of waiting (a package's first run): 0 never, 1 while "
     "preparing (default), 2 always (tests, A/B runs)."},
    {"INGOT_CONV_DIRECT", Kind::Bool, "0",
     "Experiment: every CUDA convolution on Ingot's direct loops, never cuDNN (cold-start measurements)."},
    {"INGOT_DEPTHWISE_VEC", Kind::Bool, "1",
     "Vectorized channels-last depthwise convolution kernel (0: the scalar one)."},
    {"INGOT_CONV_WGRAD_16BIT", Kind::Int, "1",
     "How autograd computes 16-bit convolution weight gradients: 1 one ai.ingot.ConvWeightGrad in 16 bits (cuDNN's "
     "backward-filter on CUDA), 2 the same widened to float32 (TF32 tensor cores on CUDA), 0 a correlation of "
     "transposed tensors. An A/B switch (docs/TRAINING.md has the measurements)."},
    {"INGOT_CPU_INT8_DEPTHWISE", Kind::Bool, "1",
     "Int8 depthwise 3x3 stride-1 channels-last convolutions on Ingot's AVX-512 VNNI+VBMI kernel where the CPU has "
     "them (0: oneDNN's; an A/B switch)."},
    {"INGOT_CPU_INT8_INT16", Kind::Int, "-1",
     "Int8 channels-last convolutions (one group or depthwise) and matrix products on the CPU as int16 multiply-adds "
     "(vpmaddwd, exact; qconv_int16.cpp). -1: on CPUs without a VNNI dot product, where oneDNN's int8 kernels "
     "saturate (the default); 1: everywhere (tests, A/B); 0: never (the exact reference loops there).",
     true},
    {"INGOT_CUDA_POOL_SIMD8", Kind::Bool, "0",
     "8-bit channels-last max pools on the GPU as SIMD byte maxima (__vmaxs4 / __vmaxu4, four bytes an instruction; 0: "
     "byte by byte, which took ResNet-50 int8 b32's pool 32 us on an H100, as long as fp16's over twice the bytes). "
     "Written without a GPU: off until measured; the CUDA tests run both.",
     true},
    {"INGOT_CUDA_NHWC_POOL", Kind::Bool, "1",
     "Let the channels-last pass keep 2-D max pools of 16-bit and int8 CUDA graphs channels last (the "
     "ai.ingot.MaxPool NHWC kernel) instead of transposing around them (0: transposes around the NCHW pool; an A/B "
     "switch, docs/PERFORMANCE.md has the measurement)."},
    {"INGOT_INT8_DEPTHWISE", Kind::Bool, "1",
     "Int8 channels-last depthwise convolutions on the GPU on Ingot's vectorized kernel (0: the direct kernel; an "
     "A/B switch, the CUDA tests run both).",
     true},
    {"INGOT_INT8_DEPTHWISE_LEAN", Kind::Bool, "1",
     "Int8 depthwise convolutions on the GPU with an int8 output at zero point 0 (bias, int8 residual, Relu, a clip "
     "or HardSwish) finish with the lean epilogue and stage their weights eight loads at a time (0, or "
     "INGOT_INT8_IMMA_LEAN=0: the generic epilogue; MobileNetV3-Large int8 b32 on an H100 1.48 -> 1.34 ms; the CUDA "
     "tests run both).",
     true},
    {"INGOT_INT8_DEPTHWISE_DP2A", Kind::Bool, "1",
     "Int8 depthwise convolutions on the GPU with int8 X and the lean epilogue on Ingot's dp2a kernel: a thread owns "
     "four channels and multiplies two taps of a channel per instruction (0: the vectorized kernel, 16 or 8 channels "
     "a thread). MobileNetV3-Large int8 b32 on an H100 1.08 -> 0.90 ms (its depthwise layers 382 -> 195 us by ncu); "
     "the CUDA tests run both.",
     true},
    {"INGOT_INT8_CUDNN_UNPADDED", Kind::Bool, "1",
     "Symmetric int8 convolutions on cuDNN whose input channels are a multiple of 8 but not of 16 (MobileNetV3's 24, "
     "40, 72, 120, 184, 200) try cuDNN's engines on X as it is before padding its channels to 16 per call (0: always "
     "padded). MobileNetV3-Large int8 b32 on an H100 1.08 -> 1.04 ms alone, 0.90 -> 0.85 with the dp2a depthwise "
     "kernel (fp16 0.88); the CUDA tests run both.",
     true},
    {"INGOT_INT8_STEM", Kind::Bool, "1",
     "Symmetric int8 channels-last convolutions of fewer than 16 input channels (a network's first) on the GPU as "
     "im2col and a 1x1 convolution (0: each tap's channels padded to 16; an A/B switch, the CUDA tests run both).",
     true},
    {"INGOT_INT8_STEM_RUN", Kind::Bool, "0",
     "With INGOT_INT8_STEM, the im2col loads a kernel row's taps as one run of S x C adjacent bytes (7x7 or 3x3 over "
     "3 channels: ResNet's and MobileNet's stems) before storing any, and writes 16-byte pieces (0: byte by byte, word "
     "stores; ResNet-50 int8 b32's im2col took 63 us of conv1's 108 on an H100 that way). Written without a GPU: off "
     "until measured; the CUDA tests run both.",
     true},
    {"INGOT_INT8_IMMA", Kind::Bool, "0",
     "Symmetric int8 channels-last convolutions on the GPU on Ingot's implicit GEMM (int8 tensor cores) instead of "
     "cuDNN's int8 engines. 0: on an H100 it ties them at batch 32 and is slower at batch 1 (ResNet-50: 2.31 vs 2.31 "
     "ms, 0.74 vs 0.41; docs/QUANTIZATION.md). The CUDA tests run both.",
     true},
    {"INGOT_INT8_POINTWISE", Kind::Int, "1",
     "Symmetric int8 channels-last 1x1 stride-1 convolutions with an int8 output at zero point 0 (bias, int8 "
     "residual, Relu or a clip) on the GPU on Ingot's persistent pointwise kernel (quantized_products.cu) before the "
     "other paths. 1: layers of 64 to 128 input channels and at least 64 output channels with at least two tiles "
     "per block (ResNet-50 int8 b32 on an H100 1.00 -> 0.95 ms); 2: every layer it takes (1.12 ms); 0: none "
     "(cuDNN's int8 engines). The CUDA tests run all three.",
     true},
    {"INGOT_INT8_POINTWISE_HARDSWISH", Kind::Bool, "1",
     "With INGOT_INT8_POINTWISE=1, also int8 1x1 convolutions of at least 64 output channels whose epilogue is a "
     "lone HardSwish (MobileNetV3's expansions; cuDNN writes their float32 output for an epilogue kernel) on the "
     "pointwise kernel. 1: MobileNetV3-Large int8 b32 on an H200 1.33 -> 1.24 ms; 0: cuDNN and the epilogue kernel. "
     "The CUDA tests run both.",
     true},
    {"INGOT_INT8_SMALL_MATMUL", Kind::Bool, "0",
     "Int8 matrix products of at most 64 rows (a classifier at a small batch) with int8 weights at zero point 0 on "
     "the GPU on Ingot's dp4a kernel with the epilogue inside, instead of cuBLASLt's int8 GEMM and an epilogue "
     "kernel. 0: on an H200 they tie (ResNet-50 int8 b32 0.908 / 0.906 ms off, 0.910 / 0.905 on); the CUDA tests "
     "run both.",
     true},
    {"INGOT_INT8_IMMA_LEAN", Kind::Bool, "1",
     "The int8 implicit GEMM's lean epilogue where the node's epilogue is one it computes (0: always the generic one; "
     "tests and A/B runs).",
     true},
    {"INGOT_INT8_IMMA_VEC16", Kind::Bool, "1",
     "The int8 implicit GEMM's lean epilogue 16 channels a step with the residual loads ahead (0: 4 a step; tests "
     "and A/B runs).",
     true},
    {"INGOT_INT8_IMMA_TILE", Kind::Int, "-1",
     "The int8 implicit GEMM's tile: -1 chosen per layer, 0 128x128, 1 128x64, 2 64x64 (tests and A/B runs).", true},
    {"INGOT_DEPTHWISE_NCHW", Kind::Bool, "1",
     "Ingot's channels-first depthwise convolution kernel (0: leave those layers to cuDNN)."},
    {"INGOT_CONV_SPLIT_K", Kind::Bool, "1",
     "Float32 convolutions with few output pixels (batch 1's late layers) on Ingot's split-K kernel (0: cuDNN; "
     "A/B runs, the CUDA tests run both).",
     true},
    {"INGOT_CUDNN_FALLBACK_ENGINES", Kind::Bool, "0",
     "Also time the engines of cuDNN's fallback heuristic list when choosing a float32 convolution's plan (1: an "
     "A/B switch; on an H100 ResNet-50 fp32 b32 took 9.31 / 9.30 ms with it, 9.27 / 9.31 without: "
     "docs/PERFORMANCE.md).",
     true},
    {"INGOT_MERGE_SIBLING_MATMULS", Kind::Bool, "1",
     "The merge-sibling-matmuls pass for CUDA targets: small products of one input with constant weights as one "
     "product and a Split (0: off; Whisper-tiny encoder fp32 b1 1.616 -> 1.537 ms on an H100: docs/PERFORMANCE.md).",
     true},
    {"INGOT_TF32_FAST_SPLIT", Kind::Bool, "1",
     "The float32 flash attention's 3xTF32 operand split by an integer add (1) instead of the TF32 conversion "
     "instruction (0): the same rounding, Whisper-tiny fp32 b32 2% faster on an H100; an A/B switch, the CUDA "
     "tests run both.",
     true},
    {"INGOT_CONV_POINTWISE", Kind::Int, "1",
     "Float32 channels-first 1x1 convolutions (no padding) on Ingot's GEMM kernel with the bias, residual and "
     "activation in it: 1 where it measured faster than cuDNN (stride 1, 64-256 input channels, a full grid), 2 "
     "every one it takes (A/B runs, tests), 0 none.",
     true},
    {"INGOT_GEMM_3XTF32_MIN_FILL", Kind::Int, "50",
     "INGOT_GEMM_3XTF32=1 takes a product only where at least this percentage of its 128 x 128 x 32 tiles' "
     "products are the product's (narrow layers stay on cuBLASLt and cuDNN).",
     true},
    {"INGOT_GEMM_3XTF32_STEP_SUMS", Kind::Bool, "1",
     "The 3xTF32 kernel sums each k8 step's products apart and adds them to its accumulators in float32 (the "
     "tensor core's adds truncate, so one sum over a long K drifts toward zero); 0 keeps one sum over K on the "
     "tensor core (A/B runs, the accuracy test).",
     true},
    {"INGOT_GEMM_3XTF32", Kind::Int, "1",
     "Float32 matrix products (MatMul, Gemm, FusedMatMul) and stride-1 1x1 convolutions on Ingot's 3xTF32 "
     "tensor-core kernel at float32's accuracy instead of cuBLASLt's and cuDNN's FMA kernels, unless TF32 is "
     "allowed: 1 grids of at least one block per SM with tiles mostly filled (INGOT_GEMM_3XTF32_MIN_FILL), 2 every "
     "product it takes (A/B runs, tests), 0 none.",
     true},
    {"INGOT_CONV_SPLIT_K_MAX_MACS", Kind::Int, "268435456",
     "The most multiply-adds of a convolution the split-K kernel takes (2^28: batch 1's layers; A/B runs).", true},
    {"INGOT_CONV_RESIDUAL_AFTER", Kind::Bool, "1",
     "Float32 convolutions with a residual: cuDNN's graph runs the convolution and bias, the epilogue kernel the "
     "residual and Relu (0: cuDNN's legacy fused call; A/B runs, the CUDA tests run both).",
     true},
    {"INGOT_CONV_RETIME", Kind::Int, "1",
     "How many of cuDNN's fastest convolution algorithms to time again inside the model at convert time."},
    // Profiler
    {"INGOT_NVTX", Kind::Bool, "0",
     "Always emit NVTX ranges for the profiler's events (they are also on when a tool sets "
     "NVTX_INJECTION64_PATH)."},
};

const Flag& find(std::string_view name, Kind kind) {
  for (const Flag& f : kFlags) {
    if (f.name == name) {
      if (f.kind != kind) fail("flag {} is read with the wrong kind", name);
      return f;
    }
  }
  fail("flag {} is not in the flags table (src/core/flags.cpp)", name);
}

std::string_view raw(const Flag& f) {
  const char* env = std::getenv(std::string(f.name).c_str());
  return env ? std::string_view(env) : f.default_value;
}

void warn_once(const Flag& f, std::string_view value, std::string_view expected) {
  static std::mutex mutex;
  static std::vector<std::string> warned;
  std::lock_guard lock(mutex);
  for (const std::string& w : warned) {
    if (w == f.name) return;
  }
  warned.emplace_back(f.name);
  std::fprintf(stderr, "ingot: %.*s='%.*s' is not %.*s; using the default (%.*s)\n", int(f.name.size()),
               f.name.data(), int(value.size()), value.data(), int(expected.size()), expected.data(),
               int(f.default_value.size()), f.default_value.data());
}

bool parse_bool(std::string_view v, bool& out) {
  if (v == "1" || v == "true" || v == "on" || v == "yes") return out = true, true;
  if (v == "0" || v == "false" || v == "off" || v == "no" || v.empty()) return out = false, true;
  return false;
}

bool parse_int(std::string_view v, int64_t& out) {
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  return ec == std::errc() && end == v.data() + v.size();
}

std::vector<std::string> split(std::string_view v) {
  std::vector<std::string> out;
  for (size_t begin = 0; begin < v.size();) {
    size_t end = v.find(',', begin);
    if (end == std::string_view::npos) end = v.size();
    if (end > begin) out.emplace_back(v.substr(begin, end - begin));
    begin = end + 1;
  }
  return out;
}

bool read_bool(const Flag& f) {
  bool value = false;
  if (std::string_view v = raw(f); !parse_bool(v, value)) {
    warn_once(f, v, "0 or 1");
    parse_bool(f.default_value, value);
  }
  return value;
}

int64_t read_int(const Flag& f) {
  int64_t value = 0;
  if (std::string_view v = raw(f); !parse_int(v, value)) {
    warn_once(f, v, "an integer");
    parse_int(f.default_value, value);
  }
  return value;
}

// A non-live switch's value, read at its first use and kept for the life of the process.
template <class T, class Read>
T once(const Flag& f, Read read) {
  if (f.live) return read(f);
  struct Cached {
    std::once_flag done;
    T value;
  };
  static Cached cache[std::size(kFlags)];
  Cached& c = cache[&f - kFlags];
  std::call_once(c.done, [&] { c.value = read(f); });
  return c.value;
}

}  // namespace

std::span<const Flag> all() { return kFlags; }

bool enabled(std::string_view name) { return once<bool>(find(name, Kind::Bool), read_bool); }

int64_t integer(std::string_view name) { return once<int64_t>(find(name, Kind::Int), read_int); }

std::vector<std::string> list(std::string_view name) {
  return once<std::vector<std::string>>(find(name, Kind::List), [](const Flag& f) { return split(raw(f)); });
}

std::string text(std::string_view name) {
  return once<std::string>(find(name, Kind::Text), [](const Flag& f) { return std::string(raw(f)); });
}

bool list_contains(std::string_view name, std::string_view item) {
  for (const std::string& s : list(name)) {
    if (s == item) return true;
  }
  return false;
}

std::string describe() {
  std::string out;
  for (const Flag& f : kFlags) {
    const char* kind = f.kind == Kind::Bool  ? "0|1"
                       : f.kind == Kind::Int ? "integer"
                       : f.kind == Kind::List ? "a,b,..."
                                              : "text";
    out += fmt::format("{}={}  (default: {}{})\n", f.name, kind, f.default_value.empty() ? "none" : f.default_value,
                       f.live ? "; read at every use" : "");
    if (const char* env = std::getenv(std::string(f.name).c_str())) out += fmt::format("    now set to '{}'\n", env);
    out += fmt::format("    {}\n", f.help);
  }
  return out;
}

}  // namespace ingot::flags

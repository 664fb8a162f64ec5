// Detection and sampling kernels: NonMaxSuppression, RoiAlign and GridSample (2-D). They follow
// the ONNX reference implementations (which follow onnxruntime), including their edge rules:
// NMS keeps ties in box-index order, RoiAlign's max mode takes the largest weighted corner, and
// GridSample reflects coordinates about the edges of the (align_corners-dependent) pixel extent.
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "backends/cpu/kernels/nn_util.h"
#include "core/dispatch.h"
#include "core/thread_pool.h"
#include "ops/kernel.h"

namespace ingot {
namespace {

// ---- NonMaxSuppression ------------------------------------------------------------------------

struct Box {
  float y1, x1, y2, x2, area;
};

Box make_box(const float* b, bool center_point) {
  Box r;
  if (center_point) {  // [x_center, y_center, width, height]
    r.x1 = b[0] - b[2] / 2;
    r.x2 = b[0] + b[2] / 2;
    r.y1 = b[1] - b[3] / 2;
    r.y2 = b[1] + b[3] / 2;
  } else {  // [y1, x1, y2, x2], corners in either order
    r.y1 = std::min(b[0], b[2]);
    r.y2 = std::max(b[0], b[2]);
    r.x1 = std::min(b[1], b[3]);
    r.x2 = std::max(b[1], b[3]);
  }
  r.area = (r.y2 - r.y1) * (r.x2 - r.x1);
  return r;
}

// True when the IoU of a and b exceeds the threshold; degenerate boxes never suppress.
bool suppresses(const Box& a, const Box& b, float iou_threshold) {
  if (a.area <= 0 || b.area <= 0) return false;
  const float h = std::min(a.y2, b.y2) - std::max(a.y1, b.y1);
  const float w = std::min(a.x2, b.x2) - std::max(a.x1, b.x1);
  if (h <= 0 || w <= 0) return false;
  const float inter = h * w;
  return inter / (a.area + b.area - inter) > iou_threshold;
}

void non_max_suppression(KernelContext& ctx) {
  const Tensor boxes = ctx.input(0).cast(DType::Float32);
  const Tensor scores = ctx.input(1).cast(DType::Float32);
  if (boxes.rank() != 3 || boxes.dim(2) != 4)
    fail("input 0 (boxes): expected [batch, boxes, 4], got {}", boxes.describe());
  if (scores.rank() != 3 || scores.dim(0) != boxes.dim(0) || scores.dim(2) != boxes.dim(1)) {
    fail("input 1 (scores): expected [{}, classes, {}] to match boxes {}, got {}", boxes.dim(0), boxes.dim(1),
         boxes.describe(), scores.describe());
  }
  int64_t max_per_class = 0;
  float iou_threshold = 0.0f;
  bool has_score_threshold = false;
  float score_threshold = 0.0f;
  if (ctx.has_input(2) && ctx.input(2).numel() > 0) max_per_class = ctx.input(2).item_int();
  if (ctx.has_input(3) && ctx.input(3).numel() > 0) iou_threshold = float(ctx.input(3).item_double());
  if (ctx.has_input(4) && ctx.input(4).numel() > 0) {
    has_score_threshold = true;
    score_threshold = float(ctx.input(4).item_double());
  }
  const int64_t center = ctx.attr_int("center_point_box");
  if (center != 0 && center != 1) fail("attribute 'center_point_box': expected 0 or 1, got {}", center);
  if (iou_threshold < 0.0f || iou_threshold > 1.0f) {
    fail("input 3 (iou_threshold): expected a value in [0, 1], got {}", iou_threshold);
  }
  const int64_t batches = boxes.dim(0), num_boxes = boxes.dim(1), classes = scores.dim(1);
  const float* bp = boxes.data<float>();
  const float* sp = scores.data<float>();
  std::vector<int64_t> selected;  // triples (batch, class, box)
  std::vector<Box> all(static_cast<size_t>(num_boxes));
  std::vector<int64_t> order;
  std::vector<int64_t> kept;
  for (int64_t b = 0; b < batches && max_per_class > 0; ++b) {
    for (int64_t i = 0; i < num_boxes; ++i) all[size_t(i)] = make_box(bp + (b * num_boxes + i) * 4, center == 1);
    for (int64_t c = 0; c < classes; ++c) {
      const float* s = sp + (b * classes + c) * num_boxes;
      order.clear();
      for (int64_t i = 0; i < num_boxes; ++i) {
        if (!has_score_threshold || s[i] > score_threshold) order.push_back(i);
      }
      std::stable_sort(order.begin(), order.end(), [&](int64_t l, int64_t r) { return s[l] > s[r]; });
      kept.clear();
      for (int64_t i : order) {
        if (int64_t(kept.size()) >= max_per_class) break;
        bool keep = std::none_of(kept.begin(), kept.end(),
                                 [&](int64_t k) { return suppresses(all[size_t(k)], all[size_t(i)], iou_threshold); });
        if (keep) kept.push_back(i);
      }
      for (int64_t i : kept) selected.insert(selected.end(), {b, c, i});
    }
  }
  Tensor& out = ctx.allocate(0, DType::Int64, {int64_t(selected.size() / 3), 3});
  std::copy(selected.begin(), selected.end(), out.data<int64_t>());
}

// ---- RoiAlign ---------------------------------------------------------------------------------

// One bilinear sample: four pixel offsets in a plane and their weights.
struct Sample {
  int64_t pos[4] = {0, 0, 0, 0};
  float w[4] = {0, 0, 0, 0};
};

void roi_align(KernelContext& ctx) {
  const Tensor& x_in = ctx.input(0);
  if (x_in.rank() != 4) fail("input 0 (X): expected [N, C, H, W], got {}", x_in.describe());
  // Sample positions and weights are float; values accumulate in float64 for float64 inputs.
  const Tensor x = x_in.cast(x_in.dtype() == DType::Float64 ? DType::Float64 : DType::Float32);
  const Tensor rois = ctx.input(1).cast(DType::Float32);
  const std::vector<int64_t> batch_indices = ctx.input(2).to_int64_vector();
  if (rois.rank() != 2 || rois.dim(1) != 4) fail("input 1 (rois): expected [num_rois, 4], got {}", rois.describe());
  if (int64_t(batch_indices.size()) != rois.dim(0) || ctx.input(2).rank() != 1) {
    fail("input 2 (batch_indices): expected [{}] to match rois, got {}", rois.dim(0), ctx.input(2).describe());
  }
  const int64_t n = x.dim(0), channels = x.dim(1), height = x.dim(2), width = x.dim(3);
  if ((height == 0 || width == 0) && channels > 0 && rois.dim(0) > 0) {
    fail("input 0 (X): cannot pool from an empty feature map {}", x.describe());
  }
  for (int64_t b : batch_indices) {
    if (b < 0 || b >= n) fail("input 2 (batch_indices): index {} is out of range for batch {}", b, n);
  }
  const int64_t out_h = ctx.attr_int("output_height"), out_w = ctx.attr_int("output_width");
  if (out_h < 1 || out_w < 1) fail("attributes 'output_height'/'output_width' must be >= 1, got {}x{}", out_h, out_w);
  const int64_t sampling_ratio = ctx.attr_int("sampling_ratio");
  if (sampling_ratio < 0) fail("attribute 'sampling_ratio': expected >= 0, got {}", sampling_ratio);
  const float spatial_scale = ctx.attr_float("spatial_scale");
  const std::string& mode = ctx.attr_string("mode");
  if (mode != "avg" && mode != "max") fail("attribute 'mode': expected 'avg' or 'max', got '{}'", mode);
  const bool is_max = mode == "max";
  // Opset 10 had no attribute and behaved as output_half_pixel.
  std::string transform = ctx.opset() < 16 ? "output_half_pixel" : ctx.attr_string("coordinate_transformation_mode");
  if (transform != "half_pixel" && transform != "output_half_pixel") {
    fail("attribute 'coordinate_transformation_mode': expected 'half_pixel' or 'output_half_pixel', got '{}'",
         transform);
  }
  const bool half_pixel = transform == "half_pixel";
  const int64_t num_rois = rois.dim(0);
  Tensor y = Tensor::empty(x.dtype(), {num_rois, channels, out_h, out_w});
  const float* rp = rois.data<float>();
  parallel_for(num_rois, 1, [&](int64_t begin, int64_t end) {
    std::vector<Sample> samples;
    for (int64_t r = begin; r < end; ++r) {
      const float* roi = rp + r * 4;
      const float offset = half_pixel ? 0.5f : 0.0f;
      const float start_w = roi[0] * spatial_scale - offset, start_h = roi[1] * spatial_scale - offset;
      float roi_w = roi[2] * spatial_scale - offset - start_w, roi_h = roi[3] * spatial_scale - offset - start_h;
      if (!half_pixel) {  // legacy behaviour: force malformed rois to be 1x1
        roi_w = std::max(roi_w, 1.0f);
        roi_h = std::max(roi_h, 1.0f);
      }
      const float bin_h = roi_h / float(out_h), bin_w = roi_w / float(out_w);
      const int64_t grid_h = sampling_ratio > 0 ? sampling_ratio : int64_t(std::ceil(roi_h / float(out_h)));
      const int64_t grid_w = sampling_ratio > 0 ? sampling_ratio : int64_t(std::ceil(roi_w / float(out_w)));
      const float count = float(std::max<int64_t>(grid_h * grid_w, 1));
      // The sample positions and weights are the same for every channel.
      samples.clear();
      for (int64_t ph = 0; ph < out_h; ++ph)
        for (int64_t pw = 0; pw < out_w; ++pw)
          for (int64_t iy = 0; iy < grid_h; ++iy) {
            const float yy = start_h + float(ph) * bin_h + (float(iy) + 0.5f) * bin_h / float(grid_h);
            for (int64_t ix = 0; ix < grid_w; ++ix) {
              const float xx = start_w + float(pw) * bin_w + (float(ix) + 0.5f) * bin_w / float(grid_w);
              Sample s;
              if (yy < -1.0f || yy > float(height) || xx < -1.0f || xx > float(width)) {
                samples.push_back(s);  // outside the feature map: contributes zero
                continue;
              }
              float fy = std::max(yy, 0.0f), fx = std::max(xx, 0.0f);
              int64_t y_low = int64_t(fy), x_low = int64_t(fx), y_high, x_high;
              if (y_low >= height - 1) {
                y_high = y_low = height - 1;
                fy = float(y_low);
              } else {
                y_high = y_low + 1;
              }
              if (x_low >= width - 1) {
                x_high = x_low = width - 1;
                fx = float(x_low);
              } else {
                x_high = x_low + 1;
              }
              const float ly = fy - float(y_low), lx = fx - float(x_low), hy = 1.0f - ly, hx = 1.0f - lx;
              s.pos[0] = y_low * width + x_low;
              s.pos[1] = y_low * width + x_high;
              s.pos[2] = y_high * width + x_low;
              s.pos[3] = y_high * width + x_high;
              s.w[0] = hy * hx;
              s.w[1] = hy * lx;
              s.w[2] = ly * hx;
              s.w[3] = ly * lx;
              samples.push_back(s);
            }
          }
      const int64_t per_bin = grid_h * grid_w;
      auto pool_channels = [&]<class A>() {
        for (int64_t c = 0; c < channels; ++c) {
          const A* plane = x.data<A>() + (batch_indices[size_t(r)] * channels + c) * height * width;
          A* out = y.data<A>() + (r * channels + c) * out_h * out_w;
          for (int64_t bin = 0; bin < out_h * out_w; ++bin) {
            const Sample* s = samples.data() + bin * per_bin;
            A acc = 0;
            for (int64_t k = 0; k < per_bin; ++k) {
              const Sample& p = s[k];
              if (is_max) {
                A v = std::max(std::max(A(p.w[0]) * plane[p.pos[0]], A(p.w[1]) * plane[p.pos[1]]),
                               std::max(A(p.w[2]) * plane[p.pos[2]], A(p.w[3]) * plane[p.pos[3]]));
                acc = k == 0 ? v : std::max(acc, v);
              } else {
                acc += A(p.w[0]) * plane[p.pos[0]] + A(p.w[1]) * plane[p.pos[1]] + A(p.w[2]) * plane[p.pos[2]] +
                       A(p.w[3]) * plane[p.pos[3]];
              }
            }
            out[bin] = is_max ? acc : acc / A(count);
          }
        }
      };
      if (x.dtype() == DType::Float64) {
        pool_channels.template operator()<double>();
      } else {
        pool_channels.template operator()<float>();
      }
    }
  });
  ctx.set_output(0, y.dtype() == x_in.dtype() ? y : y.cast(x_in.dtype()));
}

// ---- GridSample -------------------------------------------------------------------------------

enum class Padding { Zeros, Border, Reflection };

// Reflects x into [lo, hi] by repeated mirroring at both ends.
template <class F>
F reflect(F x, F lo, F hi) {
  const double range = double(hi) - double(lo);
  if (range <= 0) return lo;
  const bool below = x < lo;
  if (!below && x <= hi) return x;
  const double dx = below ? double(lo) - x : double(x) - hi;
  const double n = std::floor(dx / range);
  const F r = F(dx - n * range);
  const bool even = std::fmod(n, 2.0) == 0.0;
  return below == even ? lo + r : hi - r;
}

// Cubic convolution weights (alpha = -0.75, as PyTorch) for the 4 taps around fraction t.
template <class F>
std::array<F, 4> cubic_weights(F t) {
  constexpr F a = F(-0.75);
  auto near = [&](F d) { return ((a + 2) * d - (a + 3)) * d * d + 1; };       // |d| <= 1
  auto far = [&](F d) { return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a; };  // 1 < |d| < 2
  return {far(t + 1), near(t), near(1 - t), far(2 - t)};
}

// V: the pixel value type (float, or double for float64 and 32/64-bit integer images).
template <class V>
struct GridPlane {
  const V* data;
  int64_t h, w;
  Padding padding;
  V lo_x, hi_x, lo_y, hi_y;  // pixel extent used by reflection

  // Pixel (iy, ix), with out-of-range indices resolved by the padding mode.
  V at(int64_t iy, int64_t ix) const {
    if (padding == Padding::Zeros) {
      if (iy < 0 || iy >= h || ix < 0 || ix >= w) return V(0);
    } else if (padding == Padding::Border) {
      iy = std::clamp<int64_t>(iy, 0, h - 1);
      ix = std::clamp<int64_t>(ix, 0, w - 1);
    } else {
      iy = std::clamp<int64_t>(int64_t(reflect(V(iy), lo_y, hi_y)), 0, h - 1);
      ix = std::clamp<int64_t>(int64_t(reflect(V(ix), lo_x, hi_x)), 0, w - 1);
    }
    return data[iy * w + ix];
  }
};

// v rounded to the nearest T, saturating at T's range (NaN -> 0).
template <class T, class V>
T saturate_round(V v) {
  v = std::nearbyint(v);
  if (!(v == v)) return T(0);
  if (v <= V(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
  if (v >= V(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();  // V(max) may round up
  return T(v);
}

void grid_sample(KernelContext& ctx) {
  const Tensor& x_in = ctx.input(0);
  const Tensor& grid_in = ctx.input(1);
  if (x_in.rank() != 4) fail("input 0 (X): expected [N, C, H, W] (2-D sampling only), got {}", x_in.describe());
  if (grid_in.rank() != 4 || grid_in.dim(0) != x_in.dim(0) || grid_in.dim(3) != 2) {
    fail("input 1 (grid): expected [{}, H_out, W_out, 2], got {}", x_in.dim(0), grid_in.describe());
  }
  const std::string& mode_name = ctx.attr_string("mode");
  int mode;  // 0 nearest, 1 linear, 3 cubic
  if (mode_name == "nearest")
    mode = 0;
  else if (mode_name == "bilinear" || mode_name == "linear")
    mode = 1;
  else if (mode_name == "bicubic" || mode_name == "cubic")
    mode = 3;
  else
    fail("attribute 'mode': expected bilinear/linear, nearest or bicubic/cubic, got '{}'", mode_name);
  const std::string& pad_name = ctx.attr_string("padding_mode");
  Padding padding;
  if (pad_name == "zeros")
    padding = Padding::Zeros;
  else if (pad_name == "border")
    padding = Padding::Border;
  else if (pad_name == "reflection")
    padding = Padding::Reflection;
  else
    fail("attribute 'padding_mode': expected zeros, border or reflection, got '{}'", pad_name);
  const bool align = ctx.attr_int("align_corners") != 0;

  const int64_t n = x_in.dim(0), channels = x_in.dim(1), h = x_in.dim(2), w = x_in.dim(3);
  const int64_t oh = grid_in.dim(1), ow = grid_in.dim(2);
  if ((h == 0 || w == 0) && channels * oh * ow > 0)
    fail("input 0 (X): cannot sample an empty image {}", x_in.describe());
  // Samples pixel values of type V, with coordinates and weights of type V too (float64 grids keep
  // their precision: gradients of the grid are checked against finite differences).
  auto sample = [&]<class V>() {
    const Tensor grid = grid_in.cast(dtype_of<V>());
    const Tensor x = x_in.cast(dtype_of<V>());
    Tensor y = Tensor::empty(dtype_of<V>(), {n, channels, oh, ow});
    const V* xp = x.data<V>();
    const V* gp = grid.data<V>();
    V* yp = y.data<V>();
    // Normalized [-1, 1] -> pixel coordinates; with align_corners -1/1 are pixel centres, else edges.
    auto unnormalize = [&](V g, int64_t size) {
      return align ? (g + 1) / 2 * V(size - 1) : ((g + 1) * V(size) - 1) / 2;
    };
    const V lo_x = align ? V(0) : V(-0.5), hi_x = align ? V(w - 1) : V(w) - V(0.5);
    const V lo_y = align ? V(0) : V(-0.5), hi_y = align ? V(h - 1) : V(h) - V(0.5);
    auto fit = [&](V v, V lo, V hi, int64_t size) {
      if (v >= lo && v <= hi) return v;
      if (padding == Padding::Border) return std::clamp(v, V(0), V(size - 1));
      if (padding == Padding::Reflection) return reflect(v, lo, hi);
      // Zeros: every tap (cubic reaches 2 pixels out) is outside from here on; bounding the value
      // keeps the integer conversions defined.
      return std::clamp(v, V(-4), V(size) + V(3));
    };
    parallel_for(n * channels, 1, [&](int64_t begin, int64_t end) {
      for (int64_t nc = begin; nc < end; ++nc) {
        const int64_t b = nc / channels;
        GridPlane<V> plane{xp + nc * h * w, h, w, padding, lo_x, hi_x, lo_y, hi_y};
        V* out = yp + nc * oh * ow;
        const V* g = gp + b * oh * ow * 2;
        for (int64_t i = 0; i < oh * ow; ++i) {
          V fx = unnormalize(g[2 * i], w), fy = unnormalize(g[2 * i + 1], h);
          if (!std::isfinite(fx) || !std::isfinite(fy)) {
            out[i] = V(0);
            continue;
          }
          // As the ONNX reference: nearest rounds first; coordinates outside the pixel extent are
          // then clamped (border) or mirrored (reflection); taps outside the image follow the padding.
          if (mode == 0) {
            fx = std::nearbyint(fx);
            fy = std::nearbyint(fy);
          }
          fx = fit(fx, lo_x, hi_x, w);
          fy = fit(fy, lo_y, hi_y, h);
          if (mode == 0) {
            out[i] = plane.at(int64_t(fy), int64_t(fx));
          } else if (mode == 1) {
            const V x0 = std::floor(fx), y0 = std::floor(fy);
            const V tx = fx - x0, ty = fy - y0;
            const int64_t ix = int64_t(x0), iy = int64_t(y0);
            const V vx = tx, vy = ty;
            out[i] = (1 - vy) * ((1 - vx) * plane.at(iy, ix) + vx * plane.at(iy, ix + 1)) +
                     vy * ((1 - vx) * plane.at(iy + 1, ix) + vx * plane.at(iy + 1, ix + 1));
          } else {
            const V x0 = std::floor(fx), y0 = std::floor(fy);
            const std::array<V, 4> wx = cubic_weights(fx - x0), wy = cubic_weights(fy - y0);
            const int64_t ix = int64_t(x0) - 1, iy = int64_t(y0) - 1;
            V acc = 0;
            for (int64_t r = 0; r < 4; ++r) {
              V row = 0;
              for (int64_t c = 0; c < 4; ++c) row += V(wx[size_t(c)]) * plane.at(iy + r, ix + c);
              acc += V(wy[size_t(r)]) * row;
            }
            out[i] = acc;
          }
        }
      }
    });
    return y;
  };
  const DType dt = x_in.dtype();
  const bool wide =
      dt == DType::Float64 || dt == DType::Int32 || dt == DType::Int64 || dt == DType::UInt32 || dt == DType::UInt64;
  const Tensor y = wide ? sample.template operator()<double>() : sample.template operator()<float>();
  if (is_floating(dt)) {
    ctx.set_output(0, y.dtype() == dt ? y : y.cast(dt));
    return;
  }
  // Integer images: interpolated values round to nearest and saturate (cubic overshoots), where a
  // plain cast would truncate and overflow. Exact up to 2^24 (float) or 2^53 (double) in magnitude.
  Tensor& out = ctx.allocate(0, dt, y.shape());
  dispatch_int(dt, [&]<class T>() {
    T* op = out.data<T>();
    auto store = [&]<class V>(const V* yp) {
      for (int64_t i = 0, count = y.numel(); i < count; ++i) op[i] = saturate_round<T>(yp[i]);
    };
    if (wide)
      store(y.data<double>());
    else
      store(y.data<float>());
  });
}

}  // namespace

INGOT_CPU_KERNEL(NonMaxSuppression, non_max_suppression).versions(10).dtypes({INGOT_FLOAT_TYPES});
INGOT_CPU_KERNEL(RoiAlign, roi_align).versions(10).dtypes({INGOT_FLOAT_TYPES});
INGOT_CPU_KERNEL(GridSample, grid_sample).versions(16).dtypes({INGOT_NUMERIC_TYPES});

}  // namespace ingot

// Einsum on the CPU.
//
// The equation is parsed into integer labels per operand axis ('...' expands to labels shared
// right-aligned across operands, broadcasting size-1 dims). Two-operand contractions without
// diagonals or broadcasting -- batched matrix products in disguise ("bij,bjk->bik",
// "bhqd,bhkd->bhqk") -- are permuted into [batch, M, K] x [batch, K, N] and run through BLAS.
// Everything else takes a direct loop: each output element sums, over the labels that are
// contracted away, the product of the operands' elements.
#include <algorithm>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "backends/cpu/kernels/gemm.h"
#include "core/dispatch.h"
#include "core/thread_pool.h"
#include "ops/kernel.h"

namespace ingot {
namespace {

constexpr int kLetterLabels = 52;  // a-z, A-Z; ellipsis dims use kLetterLabels + k

int letter_label(char c) {
  if (c >= 'a' && c <= 'z') return c - 'a';
  if (c >= 'A' && c <= 'Z') return 26 + (c - 'A');
  return -1;
}

// Sorting key for implicit output: ASCII order (uppercase before lowercase), as numpy.
int ascii_of_label(int label) { return label < 26 ? 'a' + label : 'A' + (label - 26); }

struct Term {
  std::vector<int> letters_before, letters_after;  // around the ellipsis (all in before when none)
  bool has_ellipsis = false;
};

Term parse_term(const std::string& text, const std::string& equation) {
  Term t;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text.compare(i, 3, "...") == 0) {
      INGOT_CHECK(!t.has_ellipsis, "attribute equation '{}': '...' appears twice in one term", equation);
      t.has_ellipsis = true;
      i += 2;
      continue;
    }
    const int label = letter_label(text[i]);
    INGOT_CHECK(label >= 0, "attribute equation '{}': unexpected character '{}'", equation, text[i]);
    (t.has_ellipsis ? t.letters_after : t.letters_before).push_back(label);
  }
  return t;
}

struct EinsumPlan {
  std::vector<std::vector<int>> operand_labels;  // label per axis of each operand
  std::vector<int> out_labels;
  std::vector<int64_t> label_size;  // indexed by label
};

EinsumPlan plan_einsum(const std::string& raw_equation, const std::vector<const Tensor*>& xs) {
  std::string equation;
  for (char c : raw_equation)
    if (c != ' ') equation.push_back(c);
  const size_t arrow = equation.find("->");
  const std::string lhs = equation.substr(0, arrow);
  std::vector<std::string> term_texts;
  for (size_t start = 0;;) {
    const size_t comma = lhs.find(',', start);
    term_texts.push_back(lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  INGOT_CHECK(term_texts.size() == xs.size(), "attribute equation '{}': {} operand terms for {} inputs", raw_equation,
              term_texts.size(), xs.size());

  // Number of axes each operand's ellipsis covers; the broadcast ellipsis has the most.
  std::vector<Term> terms;
  int64_t ellipsis_rank = 0;
  for (size_t k = 0; k < xs.size(); ++k) {
    terms.push_back(parse_term(term_texts[k], raw_equation));
    const int64_t letters = int64_t(terms[k].letters_before.size() + terms[k].letters_after.size());
    const int64_t rank = xs[k]->rank();
    INGOT_CHECK(terms[k].has_ellipsis ? rank >= letters : rank == letters,
                "input {}: term '{}' of equation '{}' does not match its rank {} (shape {})", k, term_texts[k],
                raw_equation, rank, shape_str(xs[k]->shape()));
    if (terms[k].has_ellipsis) ellipsis_rank = std::max(ellipsis_rank, rank - letters);
  }

  EinsumPlan plan;
  plan.label_size.assign(size_t(kLetterLabels + ellipsis_rank), -1);
  std::vector<int> occurrences(plan.label_size.size(), 0);
  for (size_t k = 0; k < xs.size(); ++k) {
    std::vector<int> labels = terms[k].letters_before;
    if (terms[k].has_ellipsis) {
      const int64_t e = xs[k]->rank() - int64_t(labels.size() + terms[k].letters_after.size());
      for (int64_t j = ellipsis_rank - e; j < ellipsis_rank; ++j) labels.push_back(int(kLetterLabels + j));
      labels.insert(labels.end(), terms[k].letters_after.begin(), terms[k].letters_after.end());
    }
    for (size_t axis = 0; axis < labels.size(); ++axis) {
      const int label = labels[axis];
      const int64_t dim = xs[k]->shape()[axis];
      int64_t& size = plan.label_size[size_t(label)];
      INGOT_CHECK(size == -1 || size == dim || size == 1 || dim == 1,
                  "input {}: axis {} has size {} but the same label has size {} elsewhere (equation '{}')", k, axis,
                  dim, size, raw_equation);
      if (size == -1 || size == 1) size = dim;
      ++occurrences[size_t(label)];
    }
    plan.operand_labels.push_back(std::move(labels));
  }

  if (arrow != std::string::npos) {
    const Term out = parse_term(equation.substr(arrow + 2), raw_equation);
    plan.out_labels = out.letters_before;
    if (out.has_ellipsis) {
      for (int64_t j = 0; j < ellipsis_rank; ++j) plan.out_labels.push_back(int(kLetterLabels + j));
      plan.out_labels.insert(plan.out_labels.end(), out.letters_after.begin(), out.letters_after.end());
    }
    std::vector<bool> seen(plan.label_size.size(), false);
    for (int label : plan.out_labels) {
      INGOT_CHECK(plan.label_size[size_t(label)] != -1,
                  "attribute equation '{}': output label '{}' appears in no input", raw_equation,
                  char(ascii_of_label(label)));
      INGOT_CHECK(!seen[size_t(label)], "attribute equation '{}': output label '{}' repeated", raw_equation,
                  char(ascii_of_label(label)));
      seen[size_t(label)] = true;
    }
  } else {
    // Implicit output: the broadcast dims, then the letters used exactly once, alphabetically.
    for (int64_t j = 0; j < ellipsis_rank; ++j) plan.out_labels.push_back(int(kLetterLabels + j));
    std::vector<int> singles;
    for (int label = 0; label < kLetterLabels; ++label)
      if (occurrences[size_t(label)] == 1) singles.push_back(label);
    std::sort(singles.begin(), singles.end(), [](int a, int b) { return ascii_of_label(a) < ascii_of_label(b); });
    plan.out_labels.insert(plan.out_labels.end(), singles.begin(), singles.end());
  }
  return plan;
}

// Element strides of each label in operand k (summed over repeated labels, which walks the
// diagonal; 0 on broadcast axes).
std::vector<int64_t> label_strides(const EinsumPlan& plan, size_t k, const Shape& shape) {
  std::vector<int64_t> strides(plan.label_size.size(), 0);
  int64_t stride = 1;
  for (size_t axis = shape.size(); axis-- > 0;) {
    const int label = plan.operand_labels[k][axis];
    if (shape[axis] != 1 || plan.label_size[size_t(label)] == 1) strides[size_t(label)] += stride;
    stride *= shape[axis];
  }
  return strides;
}

// The direct loop: out[o] = sum over contracted labels of prod_k x_k[...].
template <class T>
void einsum_direct(const EinsumPlan& plan, const std::vector<const Tensor*>& xs, Tensor& y) {
  using Acc =
      std::conditional_t<std::is_integral_v<T>, std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>, double>;
  std::vector<bool> in_output(plan.label_size.size(), false);
  for (int label : plan.out_labels) in_output[size_t(label)] = true;
  std::vector<int> summed;
  for (size_t label = 0; label < plan.label_size.size(); ++label)
    if (plan.label_size[label] != -1 && !in_output[label]) summed.push_back(int(label));

  const size_t num_ops = xs.size();
  std::vector<std::vector<int64_t>> strides;
  std::vector<const T*> data;
  for (size_t k = 0; k < num_ops; ++k) {
    strides.push_back(label_strides(plan, k, xs[k]->shape()));
    data.push_back(xs[k]->data<T>());
  }
  int64_t summed_count = 1;
  for (int label : summed) summed_count *= plan.label_size[size_t(label)];

  T* out = y.data<T>();
  const int64_t out_numel = y.numel();
  parallel_for(out_numel, std::max<int64_t>(1, (1 << 12) / std::max<int64_t>(1, summed_count)),
               [&](int64_t ob, int64_t oe) {
                 std::vector<int64_t> base(num_ops), offset(num_ops), counter(summed.size());
                 for (int64_t o = ob; o < oe; ++o) {
                   // Operand offsets of this output element.
                   std::fill(base.begin(), base.end(), 0);
                   int64_t rest = o;
                   for (size_t a = plan.out_labels.size(); a-- > 0;) {
                     const int label = plan.out_labels[a];
                     const int64_t size = plan.label_size[size_t(label)];
                     const int64_t idx = rest % size;
                     rest /= size;
                     for (size_t k = 0; k < num_ops; ++k) base[k] += idx * strides[k][size_t(label)];
                   }
                   Acc acc = 0;
                   std::fill(counter.begin(), counter.end(), 0);
                   offset = base;
                   for (int64_t s = 0; s < summed_count; ++s) {
                     Acc prod = 1;
                     for (size_t k = 0; k < num_ops; ++k) prod *= Acc(data[k][offset[k]]);
                     acc += prod;
                     // Odometer step over the summed labels, innermost last.
                     for (size_t a = summed.size(); a-- > 0;) {
                       const int label = summed[a];
                       for (size_t k = 0; k < num_ops; ++k) offset[k] += strides[k][size_t(label)];
                       if (++counter[a] < plan.label_size[size_t(label)]) break;
                       for (size_t k = 0; k < num_ops; ++k) offset[k] -= counter[a] * strides[k][size_t(label)];
                       counter[a] = 0;
                     }
                   }
                   out[o] = T(acc);
                 }
               });
}

// Copies x (whose axes carry `from` labels) into a contiguous tensor whose axes are `to` labels.
template <class T>
std::vector<T> permuted(const T* x, const Shape& shape, const std::vector<int>& from, const std::vector<int>& to) {
  const size_t rank = shape.size();
  std::vector<int64_t> src_stride(rank);
  int64_t stride = 1;
  for (size_t a = rank; a-- > 0;) {
    src_stride[a] = stride;
    stride *= shape[a];
  }
  std::vector<int64_t> sizes(rank), strides(rank);
  for (size_t a = 0; a < rank; ++a) {
    const size_t src = size_t(std::find(from.begin(), from.end(), to[a]) - from.begin());
    sizes[a] = shape[src];
    strides[a] = src_stride[src];
  }
  std::vector<T> out(static_cast<size_t>(stride));
  std::vector<int64_t> counter(rank, 0);
  int64_t offset = 0;
  for (int64_t i = 0; i < stride; ++i) {
    out[size_t(i)] = x[offset];
    for (size_t a = rank; a-- > 0;) {
      offset += strides[a];
      if (++counter[a] < sizes[a]) break;
      offset -= counter[a] * strides[a];
      counter[a] = 0;
    }
  }
  return out;
}

// Tries the batched-GEMM route; returns false when the contraction is not matmul-shaped.
template <class T>
bool einsum_gemm(const EinsumPlan& plan, const std::vector<const Tensor*>& xs, Tensor& y) {
  if (xs.size() != 2) return false;
  const auto& la = plan.operand_labels[0];
  const auto& lb = plan.operand_labels[1];
  auto has = [](const std::vector<int>& v, int label) { return std::find(v.begin(), v.end(), label) != v.end(); };
  auto distinct = [](std::vector<int> v) {
    std::sort(v.begin(), v.end());
    return std::adjacent_find(v.begin(), v.end()) == v.end();
  };
  if (!distinct(la) || !distinct(lb)) return false;
  for (size_t k = 0; k < 2; ++k)
    for (size_t a = 0; a < plan.operand_labels[k].size(); ++a)
      if (xs[k]->shape()[a] != plan.label_size[size_t(plan.operand_labels[k][a])] || xs[k]->shape()[a] == 0)
        return false;  // broadcasting or empty: leave to the direct loop
  std::vector<int> batch, m_labels, n_labels, k_labels;
  for (int label : plan.out_labels) {
    const bool in_a = has(la, label), in_b = has(lb, label);
    (in_a && in_b ? batch : in_a ? m_labels : n_labels).push_back(label);
  }
  for (int label : la) {
    if (has(plan.out_labels, label)) continue;
    if (!has(lb, label)) return false;  // summed within one operand only
    k_labels.push_back(label);
  }
  for (int label : lb)
    if (!has(plan.out_labels, label) && !has(la, label)) return false;

  auto product = [&](const std::vector<int>& labels) {
    int64_t p = 1;
    for (int label : labels) p *= plan.label_size[size_t(label)];
    return p;
  };
  auto concat = [](std::initializer_list<const std::vector<int>*> parts) {
    std::vector<int> v;
    for (auto* p : parts) v.insert(v.end(), p->begin(), p->end());
    return v;
  };
  const int64_t batch_n = product(batch), m = product(m_labels), n = product(n_labels), k = product(k_labels);

  // Use an operand in place when its axes are already [batch, M, K] (or [batch, K, M]: BLAS
  // transposes); otherwise permute it into [batch, M, K].
  std::vector<T> a_buf, b_buf;
  const T* a = xs[0]->data<T>();
  const T* b = xs[1]->data<T>();
  bool trans_a = false, trans_b = false;
  if (la == concat({&batch, &k_labels, &m_labels})) {
    trans_a = true;
  } else if (la != concat({&batch, &m_labels, &k_labels})) {
    a_buf = permuted(a, xs[0]->shape(), la, concat({&batch, &m_labels, &k_labels}));
    a = a_buf.data();
  }
  if (lb == concat({&batch, &n_labels, &k_labels})) {
    trans_b = true;
  } else if (lb != concat({&batch, &k_labels, &n_labels})) {
    b_buf = permuted(b, xs[1]->shape(), lb, concat({&batch, &k_labels, &n_labels}));
    b = b_buf.data();
  }
  const std::vector<int> c_labels = concat({&batch, &m_labels, &n_labels});
  std::vector<T> c_buf;
  T* c = y.data<T>();
  if (c_labels != plan.out_labels) {
    c_buf.resize(size_t(batch_n * m * n));
    c = c_buf.data();
  }
  const int lda = int(trans_a ? m : k), ldb = int(trans_b ? k : n);
  for (int64_t i = 0; i < batch_n; ++i) {
    const T* ai = a + i * m * k;
    const T* bi = b + i * k * n;
    T* ci = c + i * m * n;
    cpu::gemm<T>(trans_a, trans_b, m, n, k, 1.0, ai, lda, bi, ldb, 0.0, ci, n);
  }
  if (!c_buf.empty()) {
    Shape c_shape;
    for (int label : c_labels) c_shape.push_back(plan.label_size[size_t(label)]);
    const std::vector<T> out = permuted(c_buf.data(), c_shape, c_labels, plan.out_labels);
    std::copy(out.begin(), out.end(), y.data<T>());
  }
  return true;
}

void einsum(KernelContext& ctx) {
  std::vector<const Tensor*> xs;
  for (size_t k = 0; k < ctx.num_inputs(); ++k) {
    xs.push_back(&ctx.input(k));
    INGOT_CHECK(xs[k]->dtype() == xs[0]->dtype(), "input {}: expected {} like input 0, got {}", k,
                dtype_name(xs[0]->dtype()), dtype_name(xs[k]->dtype()));
  }
  INGOT_CHECK(!xs.empty(), "Einsum needs at least one input");
  const EinsumPlan plan = plan_einsum(ctx.attr_string("equation"), xs);
  Shape out_shape;
  for (int label : plan.out_labels) out_shape.push_back(plan.label_size[size_t(label)]);
  Tensor& y = ctx.allocate(0, xs[0]->dtype(), out_shape);
  if (y.numel() == 0) return;
  dispatch_numeric(xs[0]->dtype(), [&]<class T>() {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>)
      if (einsum_gemm<T>(plan, xs, y)) return;
    einsum_direct<T>(plan, xs, y);
  });
}

INGOT_CPU_KERNEL(Einsum, einsum).versions(12);

}  // namespace
}  // namespace ingot

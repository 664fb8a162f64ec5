// StringNormalizer and TfIdfVectorizer on the CPU.
#include <algorithm>
#include <cctype>
#include <map>
#include <string>
#include <unordered_set>
#include <vector>

#include "core/dispatch.h"
#include "ops/kernel.h"

namespace ingot {
namespace {

// Case mapping of ASCII letters; bytes of multi-byte UTF-8 sequences are left as they are (the
// en_US locale maps only those letters the same way).
std::string to_lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}
std::string to_upper(std::string s) {
  for (char& c : s) c = char(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

void string_normalizer(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  INGOT_CHECK(x.dtype() == DType::String, "input 0 (X): expected string, got {}", dtype_name(x.dtype()));
  INGOT_CHECK(x.rank() == 1 || (x.rank() == 2 && x.dim(0) == 1), "input 0 (X): expected [C] or [1, C], got {}",
              shape_str(x.shape()));
  const std::string& action = ctx.attr_string("case_change_action");
  INGOT_CHECK(action == "NONE" || action == "LOWER" || action == "UPPER",
              "attribute case_change_action: expected NONE, LOWER or UPPER, got '{}'", action);
  const std::string& locale = ctx.attr_string("locale");
  INGOT_CHECK(locale.empty() || locale.starts_with("en_US") || locale == "C",
              "attribute locale: only en_US is supported, got '{}'", locale);
  const bool case_sensitive = ctx.attr_int("is_case_sensitive") != 0;
  std::unordered_set<std::string> stopwords;
  if (ctx.has_attr("stopwords"))
    for (const std::string& w : ctx.attr_strings("stopwords")) stopwords.insert(case_sensitive ? w : to_lower(w));

  std::vector<std::string> kept;
  for (const std::string& s : x.span<std::string>()) {
    if (stopwords.count(case_sensitive ? s : to_lower(s))) continue;
    kept.push_back(action == "LOWER" ? to_lower(s) : action == "UPPER" ? to_upper(s) : s);
  }
  // ONNX outputs a single empty string when everything was removed.
  if (kept.empty()) kept.emplace_back();
  const int64_t count = int64_t(kept.size());
  Tensor& y = ctx.allocate(0, DType::String, x.rank() == 1 ? Shape{count} : Shape{1, count});
  std::string* out = y.data<std::string>();
  for (int64_t i = 0; i < count; ++i) out[i] = std::move(kept[size_t(i)]);
}

// The pool's n-grams, keyed by their items, mapping to their output column.
template <class Item>
struct NgramPool {
  std::map<std::vector<Item>, int64_t> columns;
};

template <class Item>
NgramPool<Item> build_pool(const KernelContext& ctx, const std::vector<Item>& pool) {
  const auto& counts = ctx.attr_ints("ngram_counts");
  const auto& indexes = ctx.attr_ints("ngram_indexes");
  NgramPool<Item> result;
  size_t ngram = 0;  // running n-gram number, indexing ngram_indexes
  for (size_t level = 0; level < counts.size(); ++level) {
    const int64_t n = int64_t(level) + 1;
    const int64_t start = counts[level];
    const int64_t end = level + 1 < counts.size() ? counts[level + 1] : int64_t(pool.size());
    INGOT_CHECK(start >= 0 && start <= end && end <= int64_t(pool.size()) && (end - start) % n == 0,
                "attribute ngram_counts: entry {} ({}) does not delimit whole {}-grams of the pool of {} items", level,
                start, n, pool.size());
    for (int64_t p = start; p < end; p += n, ++ngram) {
      INGOT_CHECK(ngram < indexes.size(), "attribute ngram_indexes: {} entries, fewer than the pool's n-grams",
                  indexes.size());
      INGOT_CHECK(indexes[ngram] >= 0, "attribute ngram_indexes: entry {} is negative ({})", ngram, indexes[ngram]);
      result.columns[std::vector<Item>(pool.begin() + p, pool.begin() + p + n)] = indexes[ngram];
    }
  }
  return result;
}

// Counts every n-gram (min_n..max_n items, consecutive items `skip + 1` apart for skip in
// 0..max_skip) of each row; a unigram is counted once whatever the skip.
template <class Item>
void count_ngrams(const std::vector<Item>& items, int64_t rows, int64_t cols, const NgramPool<Item>& pool,
                  int64_t min_n, int64_t max_n, int64_t max_skip, int64_t width, std::vector<double>& counts) {
  std::vector<Item> key;
  for (int64_t r = 0; r < rows; ++r) {
    const Item* row = items.data() + r * cols;
    double* out = counts.data() + r * width;
    for (int64_t n = min_n; n <= max_n; ++n) {
      const int64_t skips = n == 1 ? 0 : max_skip;
      for (int64_t skip = 0; skip <= skips; ++skip) {
        const int64_t gap = skip + 1;
        for (int64_t start = 0; start + (n - 1) * gap < cols; ++start) {
          key.clear();
          for (int64_t k = 0; k < n; ++k) key.push_back(row[start + k * gap]);
          auto it = pool.columns.find(key);
          if (it != pool.columns.end()) out[it->second] += 1;
        }
      }
    }
  }
}

void tfidf_vectorizer(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  INGOT_CHECK(x.rank() == 1 || x.rank() == 2, "input 0 (X): expected [C] or [N, C], got {}", shape_str(x.shape()));
  const std::string& mode = ctx.attr_string("mode");
  INGOT_CHECK(mode == "TF" || mode == "IDF" || mode == "TFIDF", "attribute mode: expected TF, IDF or TFIDF, got '{}'",
              mode);
  const int64_t min_n = ctx.attr_int("min_gram_length"), max_n = ctx.attr_int("max_gram_length");
  const int64_t max_skip = ctx.attr_int("max_skip_count");
  INGOT_CHECK(min_n >= 1 && min_n <= max_n, "attributes min/max_gram_length: expected 1 <= min <= max, got {}, {}",
              min_n, max_n);
  INGOT_CHECK(max_skip >= 0, "attribute max_skip_count: expected >= 0, got {}", max_skip);
  const auto& indexes = ctx.attr_ints("ngram_indexes");
  const int64_t width = indexes.empty() ? 0 : *std::max_element(indexes.begin(), indexes.end()) + 1;
  const int64_t rows = x.rank() == 2 ? x.dim(0) : 1, cols = x.dim(-1);
  std::vector<double> counts(static_cast<size_t>(rows * width), 0.0);

  if (x.dtype() == DType::String) {
    INGOT_CHECK(ctx.has_attr("pool_strings"), "attribute pool_strings: required for a string input");
    const auto pool = build_pool<std::string>(ctx, ctx.attr_strings("pool_strings"));
    const auto s = x.span<std::string>();
    count_ngrams(std::vector<std::string>(s.begin(), s.end()), rows, cols, pool, min_n, max_n, max_skip, width, counts);
  } else {
    INGOT_CHECK(x.dtype() == DType::Int32 || x.dtype() == DType::Int64,
                "input 0 (X): expected string, int32 or int64, got {}", dtype_name(x.dtype()));
    INGOT_CHECK(ctx.has_attr("pool_int64s"), "attribute pool_int64s: required for an integer input");
    const auto pool = build_pool<int64_t>(ctx, ctx.attr_ints("pool_int64s"));
    count_ngrams(x.to_int64_vector(), rows, cols, pool, min_n, max_n, max_skip, width, counts);
  }

  std::vector<float> weights;
  if (ctx.has_attr("weights")) {
    weights = ctx.attr_floats("weights");
    INGOT_CHECK(int64_t(weights.size()) >= width, "attribute weights: {} entries, expected {} (one per output column)",
                weights.size(), width);
  }
  Tensor& y = ctx.allocate(0, DType::Float32, x.rank() == 2 ? Shape{rows, width} : Shape{width});
  float* out = y.data<float>();
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < width; ++c) {
      const double count = counts[size_t(r * width + c)];
      const double w = weights.empty() ? 1.0 : weights[size_t(c)];
      const double v = mode == "TF" ? count : mode == "IDF" ? (count > 0 ? w : 0.0) : count * w;
      out[r * width + c] = float(v);
    }
  }
}

}  // namespace

INGOT_CPU_KERNEL(StringNormalizer, string_normalizer).versions(10).dtypes({DType::String});
INGOT_CPU_KERNEL(TfIdfVectorizer, tfidf_vectorizer).versions(9).dtypes({DType::String, DType::Int32, DType::Int64});

}  // namespace ingot

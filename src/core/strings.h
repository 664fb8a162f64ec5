// Joining items into text for messages and printers.
#pragma once
#include <string>
#include <string_view>

namespace ingot {

// join(v, ", ", [](const auto& x) { return x.name; }) -> "a, b, c"
template <class Range, class Format>
std::string join(const Range& items, std::string_view separator, Format format) {
  std::string out;
  bool first = true;
  for (const auto& item : items) {
    if (!first) out.append(separator);
    out.append(format(item));
    first = false;
  }
  return out;
}

template <class Range>
std::string join(const Range& items, std::string_view separator) {
  return join(items, separator, [](const auto& x) {
    if constexpr (std::is_convertible_v<decltype(x), std::string_view>)
      return std::string(x);
    else
      return std::to_string(x);
  });
}

}  // namespace ingot

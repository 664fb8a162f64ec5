// `ingot ops`: the op catalogue with the kernels each backend registers. `--markdown` prints
// docs/OPERATORS.md (a test fails when the committed file is stale).
#include <ingot/amp.h>

#include <algorithm>
#include <iostream>
#include <set>

#include "commands.h"
#include "core/strings.h"
#include "ops/batching.h"
#include "ops/kernel.h"

namespace ingot::cli {
namespace {

std::string versions(int since, int until) {
  return until == INT_MAX ? std::to_string(since) + "+" : std::to_string(since) + "-" + std::to_string(until);
}

// "float32, float16, ..." for the dtypes of every kernel of this op on this backend; "-" when none.
std::string kernel_summary(const OpDef& def, DeviceType backend) {
  std::vector<std::string> parts;
  for (const KernelDef* k : KernelRegistry::instance().all()) {
    if (k->op != def.name || k->domain != def.domain || k->backend != backend) continue;
    auto names = [](const std::vector<DType>& d) { return join(d, ", ", [](DType x) { return std::string(dtype_name(x)); }); };
    std::string types = !k->type_constraints.empty()
                            ? join(k->type_constraints, " / ", [&](const auto& c) { return c.first + " " + names(c.second); })
                        : k->dtypes.empty() ? "all dtypes"
                                            : names(k->dtypes);
    parts.push_back("opset " + versions(k->since_version, k->until_version) + ": " + types);
  }
  return parts.empty() ? "-" : join(parts, "; ");
}

}  // namespace

Runner add_ops_command(CLI::App& app) {
  auto markdown = std::make_shared<bool>(false);
  app.add_flag("--markdown", *markdown, "Print the table of docs/OPERATORS.md");
  return [markdown] {
    auto defs = OpCatalogue::instance().all();
    if (!*markdown) {
      for (const OpDef* d : defs) {
        std::cout << (d->domain.empty() ? "" : d->domain + ".") << d->name << "  opsets "
                  << versions(d->since_version, d->until_version) << "  cpu: " << kernel_summary(*d, DeviceType::CPU)
                  << "\n";
      }
      return 0;
    }
    std::cout
        << "# Operators\n\n"
        << "Generated from the op catalogue by `ingot ops --markdown`; the test `docs.operators` fails when this\n"
        << "file is stale. Opsets: the versions the definition covers. Backend columns: the kernels registered,\n"
        << "with the opset range and the dtypes of the first input each accepts (or, as `T1 uint8, int8 / T2 ...`,\n"
        << "the dtypes it takes for each type variable of the op's signature). Gradient: whether the op has a\n"
        << "gradient rule (checked by `ingot gradcheck`), or none by design (`none`: its results do not vary with\n"
        << "its float inputs; `ingot gradcheck --list` says why). vmap: the op's batching rule (`rule`), the one shared by\n"
        << "elementwise ops (`elementwise`), or none (the op runs once per batch element under vmap). autocast:\n"
        << "what an autocast region does to the op's float inputs (include/ingot/amp.h; `low`: cast to float16 or\n"
        << "bfloat16, `follow`: the widest float dtype among them, `float32`: 16-bit inputs cast up).\n\n"
        << "| op | domain | opsets | CPU | CUDA | gradient | vmap | autocast |\n|---|---|---|---|---|---|---|---|\n";
    for (const OpDef* d : defs) {
      std::cout << "| " << d->name << " | " << (d->domain.empty() ? "ai.onnx" : d->domain) << " | "
                << versions(d->since_version, d->until_version) << " | " << kernel_summary(*d, DeviceType::CPU) << " | "
                << kernel_summary(*d, DeviceType::CUDA) << " | " << (d->vjp ? "yes" : d->no_gradient.empty() ? "" : "none") << " | "
                << (d->batch ? "rule" : batch_rule_of(*d) ? "elementwise" : "") << " | "
                << amp::autocast_policy(d->name, d->domain) << " |\n";
    }
    size_t differentiable = std::count_if(defs.begin(), defs.end(), [](const OpDef* d) { return d->vjp != nullptr; });
    size_t batched = std::count_if(defs.begin(), defs.end(), [](const OpDef* d) { return batch_rule_of(*d) != nullptr; });
    std::cout << "\n" << defs.size() << " operators, " << differentiable << " with a gradient rule, " << batched
              << " with a batching rule.\n";
    return 0;
  };
}

}  // namespace ingot::cli

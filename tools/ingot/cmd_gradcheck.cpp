// `ingot gradcheck`: every gradient rule against finite differences (CPU, float64) or, with
// --device cuda, the float32 gradients there against the CPU's (autograd/gradcheck.h).
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <regex>

#include "autograd/gradcheck.h"
#include "commands.h"
#include "core/strings.h"

namespace ingot::cli {

Runner add_gradcheck_command(CLI::App& app) {
  struct Options {
    std::string device = "cpu", op, json;
    bool second_order = false, list = false;
  };
  auto o = std::make_shared<Options>();
  app.add_option("--device", o->device, "cpu: against finite differences in float64; cuda: against the CPU")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--op", o->op, "Only the ops whose name matches this regular expression");
  app.add_option("--json", o->json, "Also write {\"ops\": [{op, device, passed, max_error}], passed, failed} here");
  app.add_flag("--second-order", o->second_order,
               "Also check second derivatives (the rules of elementwise ops, MatMul, Gemm, Conv, Softmax, norms)");
  app.add_flag("--list", o->list, "List the ops with float results that have no gradient rule, and why");
  return [o] {
    if (o->list) {
      for (const auto& [def, why] : non_differentiable_ops())
        std::cout << (def->domain.empty() ? "" : def->domain + ".") << def->name << ": " << why << "\n";
      return 0;
    }
    std::regex filter(o->op.empty() ? ".*" : o->op);
    GradcheckOptions options;
    options.device = o->device == "cuda" ? Device::parse("cuda") : Device::cpu();
    nlohmann::json report = {{"ops", nlohmann::json::array()}};
    int passed = 0, failed = 0, skipped = 0;
    for (const OpDef* def : differentiable_ops()) {
      std::string name = def->domain.empty() ? def->name : def->domain + "." + def->name;
      if (!std::regex_search(name, filter)) continue;
      options.second_order = o->second_order && second_order_checked(*def);
      GradcheckResult r = gradcheck(*def, options);
      if (r.skipped) {
        ++skipped;
        std::cout << "SKIP " << name << "  " << r.message << "\n";
        report["ops"].push_back({{"op", name}, {"device", r.device}, {"skipped", true}, {"reason", r.message}});
        continue;
      }
      (r.passed ? passed : failed)++;
      std::cout << (r.passed ? "PASS " : "FAIL ") << name << "  " << r.cases << " cases, max error "
                << fmt::format("{:.2g}", r.max_error) << (options.second_order ? " (and second order)" : "")
                << (r.message.empty() ? "" : "  " + r.message) << "\n"
                << std::flush;
      report["ops"].push_back(
          {{"op", name}, {"device", r.device}, {"passed", r.passed}, {"max_error", r.max_error}, {"cases", r.cases}});
    }
    std::cout << passed << " passed, " << failed << " failed" << (skipped ? fmt::format(", {} checked elsewhere", skipped) : "")
              << "\n";
    report["passed"] = passed;
    report["failed"] = failed;
    report["skipped"] = skipped;
    if (!o->json.empty()) {
      std::ofstream out(o->json);
      if (!out) fail("cannot write {}", o->json);
      out << report.dump(2) << "\n";
    }
    return failed == 0 && passed > 0 ? 0 : 1;
  };
}

}  // namespace ingot::cli

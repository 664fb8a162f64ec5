// `ingot launch --nproc-per-node N CMD [ARGS...]`: data-parallel training on one host (torchrun's
// job): N processes of CMD with RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE and INGOT_RENDEZVOUS
// set (include/ingot/distributed.h); exits with the first failing rank's status.
#include <ingot/distributed.h>

#include "commands.h"

namespace ingot::cli {

Runner add_launch_command(CLI::App& app) {
  auto nproc = std::make_shared<int>(1);
  auto raw = std::make_shared<bool>(false);
  auto no_bind = std::make_shared<bool>(false);
  app.add_option("--nproc-per-node,--nproc,--gpus", *nproc,
                 "Processes to start (one per GPU: rank r uses cuda:r; on the CPU, one per share of the cores)")
      ->check(CLI::Range(1, 1024));
  app.add_flag("--no-prefix", *raw, "Leave the ranks' output as written (no \"[rank N]\" prefix on each line)");
  app.add_flag("--no-bind", *no_bind, "Let every rank use every CPU (default: each rank its own slice of them)");
  app.fallthrough(false);  // (inherited from the root) or the command would be offered to the root
  app.prefix_command();    // everything from the command on is the command's own
  app.footer("Example: ingot launch --nproc-per-node 2 ingot-fashion-mnist --device cuda");
  return [nproc, raw, no_bind, &app] {
    std::vector<std::string> command = app.remaining();
    if (command.empty()) throw CLI::ValidationError("launch: no command to run (ingot launch --nproc-per-node N CMD ...)");
    distributed::LaunchOptions options;
    options.nproc = *nproc;
    options.prefix_output = !*raw;
    options.bind_cpus = !*no_bind;
    return distributed::launch(command, options);
  };
}

}  // namespace ingot::cli

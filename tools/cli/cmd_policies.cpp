// phasealloc policies: the registered policies and what they do.
#include <iostream>

#include "commands.hpp"
#include "phasealloc/policies/policy_registry.hpp"
#include "text_table.hpp"

namespace phasealloc::cli {

void add_policies_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("policies", "List the policies a --policy SPEC may name");
  cmd->callback([] {
    text_table table({"policy", "what it does"});
    for (const policy_entry& e : policy_names()) table.add({std::string(e.name), std::string(e.summary)});
    std::cout << table.render();
  });
}

}  // namespace phasealloc::cli

#include "job_runner.hpp"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "commands.hpp"

extern char** environ;

namespace phasealloc::cli {

job_result run_job(const std::vector<std::string>& argv, const std::vector<std::pair<std::string, std::string>>& env,
                   const std::function<void(double)>& alive, bool stdout_to_stderr, int poll_ms) {
  if (argv.empty()) throw command_error("no command to run");
  std::vector<std::string> entries;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry(*e);
    const std::string name = entry.substr(0, entry.find('='));
    bool replaced = false;
    for (const auto& [k, v] : env) replaced = replaced || k == name;
    if (!replaced) entries.push_back(entry);
  }
  for (const auto& [k, v] : env) entries.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (std::string& e : entries) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = argv;
  std::vector<char*> argp;
  for (std::string& a : args) argp.push_back(a.data());
  argp.push_back(nullptr);

  const auto start = std::chrono::steady_clock::now();
  const auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (stdout_to_stderr) posix_spawn_file_actions_adddup2(&actions, STDERR_FILENO, STDOUT_FILENO);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, argp[0], &actions, nullptr, argp.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw command_error(fmt::format("cannot start {}: {}", argv[0], std::strerror(rc)));
  int status = 0;
  for (;;) {
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) throw command_error(fmt::format("waitpid: {}", std::strerror(errno)));
    if (alive) alive(elapsed());
    std::this_thread::sleep_for(std::chrono::milliseconds(poll_ms));
  }
  job_result r;
  r.seconds = elapsed();
  if (WIFSIGNALED(status)) {
    r.signaled = true;
    r.exit_status = 128 + WTERMSIG(status);
  } else {
    r.exit_status = WEXITSTATUS(status);
  }
  return r;
}

}  // namespace phasealloc::cli

// A fault inside a device arena is the simulator's "illegal address": an access to device memory
// that was freed, unmapped, or never mapped. The handler says so in one line, then hands the
// signal on (to the previous handler, e.g. Python's faulthandler, or the default action), so the
// process still dies as it would on a GPU with an illegal-address error.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

#include "detail.hpp"
#include "simcuda/core.hpp"

namespace simcuda {

namespace {

struct sigaction g_previous_segv {};
struct sigaction g_previous_bus {};

void write_str(const char* s) { (void)!write(STDERR_FILENO, s, std::strlen(s)); }

void write_hex(std::uintptr_t v) {
  char buf[19] = "0x";
  for (int i = 0; i < 16; ++i) buf[2 + i] = "0123456789abcdef"[(v >> (60 - 4 * i)) & 0xf];
  buf[18] = '\0';
  write_str(buf);
}

void on_fault(int signo, siginfo_t* info, void* context) {
  auto address = reinterpret_cast<std::uintptr_t>(info->si_addr);
  int device = -1;
  if (detail::fault_in_arena(address, &device)) {
    char digit[3] = {static_cast<char>('0' + device % 10), '\0', '\0'};
    if (device >= 10) {
      digit[0] = static_cast<char>('0' + device / 10);
      digit[1] = static_cast<char>('0' + device % 10);
    }
    write_str("simcuda: illegal address ");
    write_hex(address);
    write_str(" on simulated GPU ");
    write_str(digit);
    write_str(": device memory that is freed, unmapped or without access (a use after free)\n");
  }
  const struct sigaction& previous = signo == SIGBUS ? g_previous_bus : g_previous_segv;
  if (previous.sa_flags & SA_SIGINFO) {
    if (previous.sa_sigaction) return previous.sa_sigaction(signo, info, context);
  } else if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN) {
    return previous.sa_handler(signo);
  }
  // Default action: restore it and return, so the faulting access runs again and kills us.
  signal(signo, SIG_DFL);
}

}  // namespace

void install_fault_reporter() noexcept {
  static std::atomic<bool> installed{false};
  if (installed.exchange(true)) return;
  struct sigaction action {};
  action.sa_sigaction = on_fault;
  action.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
  sigemptyset(&action.sa_mask);
  sigaction(SIGSEGV, &action, &g_previous_segv);
  sigaction(SIGBUS, &action, &g_previous_bus);
}

}  // namespace simcuda

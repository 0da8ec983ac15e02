#include "parallel/child_privdiff.hpp"

#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace privdiff::core {

namespace {

volatile std::sig_atomic_t held_signal = 0;
extern "C" void remember_held_signal(int signal) { held_signal = signal; }

}  // namespace

StopSignalsHeld::StopSignalsHeld() {
  struct sigaction action {};
  action.sa_handler = remember_held_signal;
  sigemptyset(&action.sa_mask);
  held_signal = 0;
  sigaction(SIGINT, &action, &old_int_);
  sigaction(SIGTERM, &action, &old_term_);
}

StopSignalsHeld::~StopSignalsHeld() { restore(); }

int StopSignalsHeld::take() {
  const int signal = held_signal;
  held_signal = 0;
  return signal;
}

void StopSignalsHeld::restore() const {
  sigaction(SIGINT, &old_int_, nullptr);
  sigaction(SIGTERM, &old_term_, nullptr);
}

pid_t start_child_privdiff(const std::vector<std::string>& argv, const StopSignalsHeld& held, const std::string& what,
                           const std::function<void()>& setup) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("cannot start " + what + ": " + std::strerror(errno));
  if (pid > 0) return pid;
  held.restore();
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (::getppid() != parent) std::_Exit(3);  // the parent died before the line above: stopped
  if (setup) setup();
  ::execv("/proc/self/exe", args.data());
  std::fprintf(stderr, "privdiff: cannot start %s: %s\n", what.c_str(), std::strerror(errno));
  std::_Exit(127);
}

}  // namespace privdiff::core

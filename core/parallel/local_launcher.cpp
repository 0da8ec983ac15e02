#include "parallel/local_launcher.hpp"

#include "parallel/child_privdiff.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <stdexcept>
#include <thread>

namespace privdiff::core {

namespace {

std::string describe(int status) {
  if (WIFSIGNALED(status)) return std::string("was killed by signal ") + std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")";
  return "exited with code " + std::to_string(WEXITSTATUS(status));
}

}  // namespace

int free_loopback_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error(std::string("cannot open a socket: ") + std::strerror(errno));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t length = sizeof address;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    const std::string why = std::strerror(errno);
    ::close(fd);
    throw std::runtime_error("cannot find a free port on 127.0.0.1: " + why);
  }
  ::close(fd);
  return ntohs(address.sin_port);
}

int run_local_processes(int nproc, const std::vector<std::string>& argv, std::ostream& err, int grace_seconds) {
  if (nproc < 1 || argv.empty()) throw std::invalid_argument("run_local_processes: nothing to run");
  const std::string port = std::to_string(free_loopback_port());
  // The launcher waits: Ctrl-C reaches the ranks from the terminal (they stop together at the end
  // of a step, rank 0 deciding); a SIGTERM sent to the launcher alone is passed on.
  StopSignalsHeld held;
  std::vector<pid_t> pids(static_cast<std::size_t>(nproc), -1);
  for (int rank = 0; rank < nproc; ++rank) {
    pids[static_cast<std::size_t>(rank)] = start_child_privdiff(argv, held, "rank " + std::to_string(rank), [&] {
      ::setenv("RANK", std::to_string(rank).c_str(), 1);
      ::setenv("LOCAL_RANK", std::to_string(rank).c_str(), 1);
      ::setenv("WORLD_SIZE", std::to_string(nproc).c_str(), 1);
      ::setenv("LOCAL_WORLD_SIZE", std::to_string(nproc).c_str(), 1);
      ::setenv("MASTER_ADDR", "127.0.0.1", 1);
      ::setenv("MASTER_PORT", port.c_str(), 1);
    });
  }

  int running = nproc, result = 0, stopped = 0, failed_rank = -1;
  bool stopping_others = false;
  auto stop_others = [&](int signal) {
    for (const pid_t pid : pids) {
      if (pid > 0) ::kill(pid, signal);
    }
  };
  auto deadline = std::chrono::steady_clock::time_point::max();
  while (running > 0) {
    if (held.take() == SIGTERM) stop_others(SIGTERM);
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid == 0 || (pid < 0 && errno == EINTR)) {
      if (stopping_others && std::chrono::steady_clock::now() > deadline) {
        // Still there after the grace period: hung (or stopped) — quite possibly why the run failed.
        for (int r = 0; r < nproc; ++r) {
          if (pids[static_cast<std::size_t>(r)] > 0) {
            err << "privdiff: rank " << r << " of " << nproc << " did not stop within " << grace_seconds
                << " s (it hangs?): killed\n";
          }
        }
        stop_others(SIGKILL);
        deadline = std::chrono::steady_clock::time_point::max();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    if (pid < 0) break;  // no children left
    int rank = 0;
    while (rank < nproc && pids[static_cast<std::size_t>(rank)] != pid) ++rank;
    if (rank == nproc) continue;
    pids[static_cast<std::size_t>(rank)] = -1;
    --running;
    const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    const bool stop = WIFEXITED(status) && WEXITSTATUS(status) == 3;
    if (stop) ++stopped;
    if (!ok && !stop && failed_rank < 0 && !stopping_others) {
      failed_rank = rank;
      result = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
      if (result != 2) {  // 2: a refusal the rank has explained; nothing more to say
        err << "privdiff: rank " << rank << " of " << nproc << " " << describe(status);
        if (running > 0) err << "; stopping the other rank(s)";
        err << "\n";
      }
      stopping_others = true;
      stop_others(SIGTERM);
      deadline = std::chrono::steady_clock::now() + std::chrono::seconds(grace_seconds);
    }
  }
  if (failed_rank >= 0) return result;
  return stopped > 0 ? 3 : 0;
}

}  // namespace privdiff::core

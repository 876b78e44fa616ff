// A stand-in for nvidia-cuda-mps-control, the NVIDIA MPS control program, for
// tests on machines without a GPU. It follows the real CLI:
//   nvidia-cuda-mps-control -d   daemonise (the launcher exits 0 at once), take
//                                $CUDA_MPS_PIPE_DIRECTORY/control_lock, serve the
//                                unix socket `control` there, write
//                                nvidia-cuda-mps-control.pid (removed on quit; the
//                                socket file stays) and $CUDA_MPS_LOG_DIRECTORY/control.log
//   nvidia-cuda-mps-control      client: each stdin line is a command sent to the
//                                daemon, its answer printed; exit 1 when no daemon
//                                answers
// Commands: get_server_list, quit, set_default_active_thread_percentage N,
// get_default_active_thread_percentage. Defaults of the pipe and log directories
// are the real ones (/tmp/nvidia-mps, /var/log/nvidia-mps).
// Test knobs (environment of the -d launcher, never of the real program):
//   SIMMPS_FAIL=exclusive_thread  the daemon logs that the GPU's compute mode
//                                 forbids MPS and exits 1 after forking
//   SIMMPS_START_DELAY_MS=N       the daemon writes its pid file and listens
//                                 only after N ms
//   SIMMPS_IGNORE_QUIT=1          the daemon answers quit but keeps running
//   SIMMPS_RECORD=FILE            the launcher appends "start <CUDA_VISIBLE_DEVICES>"
//   SIMMPS_CLIENT_EXIT0=1         the client exits 0 when no daemon answers (a
//                                 client that reports failure only on stderr)
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <iostream>
#include <string>

namespace {

std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

std::string pipe_dir() {
  return env_or("CUDA_MPS_PIPE_DIRECTORY", "/tmp/nvidia-mps");
}
std::string log_dir() {
  return env_or("CUDA_MPS_LOG_DIRECTORY", "/var/log/nvidia-mps");
}

void log_line(const std::string& text) {
  FILE* f = std::fopen((log_dir() + "/control.log").c_str(), "a");
  if (!f) return;
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  tm t{};
  gmtime_r(&ts.tv_sec, &t);
  char stamp[64];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S", &t);
  std::fprintf(f, "[%s.%03ld Control %d] %s\n", stamp, ts.tv_nsec / 1000000,
               static_cast<int>(getpid()), text.c_str());
  std::fclose(f);
}

sockaddr_un socket_address() {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  const std::string path = pipe_dir() + "/control";
  std::snprintf(a.sun_path, sizeof a.sun_path, "%s", path.c_str());
  return a;
}

bool read_line(int fd, std::string& line) {
  char c;
  while (::read(fd, &c, 1) == 1) {
    if (c == '\n') return true;
    line += c;
    if (line.size() > 4096) return false;
  }
  return !line.empty();
}

void write_all(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    const ssize_t n = ::write(fd, s.data() + done, s.size() - done);
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

int serve(int listener) {
  double default_percentage = 100.0;
  const bool ignore_quit = env_or("SIMMPS_IGNORE_QUIT", "") == "1";
  for (;;) {
    const int c = ::accept(listener, nullptr, nullptr);
    if (c < 0) {
      if (errno == EINTR) continue;
      return 1;
    }
    std::string cmd;
    read_line(c, cmd);
    log_line("Accepting connection...");
    log_line("NEW UI");
    log_line("Cmd:" + cmd);
    std::string reply;
    bool quit = false;
    const std::string set = "set_default_active_thread_percentage ";
    if (cmd == "get_server_list") {
      reply = "";  // no MPS server: no client has connected
    } else if (cmd == "get_default_active_thread_percentage") {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.1f\n", default_percentage);
      reply = buf;
    } else if (cmd.rfind(set, 0) == 0) {
      char* end = nullptr;
      const double v = std::strtod(cmd.c_str() + set.size(), &end);
      if (end == cmd.c_str() + set.size() || v <= 0 || v > 100) {
        reply = "Invalid active thread percentage\n";
      } else {
        default_percentage = v;
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.1f\n", v);
        reply = buf;
      }
    } else if (cmd == "quit") {
      quit = !ignore_quit;
    } else {
      reply = "Unrecognized command: " + cmd + "\n";
    }
    write_all(c, reply);
    ::close(c);
    if (quit) {
      ::unlink((pipe_dir() + "/nvidia-cuda-mps-control.pid").c_str());
      log_line("Exit");
      return 0;
    }
  }
}

int daemon_mode() {
  if (const char* rec = std::getenv("SIMMPS_RECORD")) {
    if (FILE* f = std::fopen(rec, "a")) {
      std::fprintf(f, "start %s\n", env_or("CUDA_VISIBLE_DEVICES", "").c_str());
      std::fclose(f);
    }
  }
  // The lock is taken before forking: the daemon keeps it through the shared
  // open file description, and a second -d fails here like the real one.
  const std::string lock_path = pipe_dir() + "/control_lock";
  const int lock = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (lock < 0) {
    std::fprintf(stderr, "Cannot open %s: %s\n", lock_path.c_str(), std::strerror(errno));
    return 1;
  }
  if (::flock(lock, LOCK_EX | LOCK_NB) != 0) {
    std::fprintf(stderr, "An instance of this daemon is already running\n");
    return 1;
  }
  const pid_t child = ::fork();
  if (child < 0) return 1;
  if (child > 0) return 0;
  ::setsid();
  const int null = ::open("/dev/null", O_RDWR);
  ::dup2(null, 0);
  ::dup2(null, 1);
  ::dup2(null, 2);
  if (null > 2) ::close(null);
  if (const char* d = std::getenv("SIMMPS_START_DELAY_MS"))
    ::usleep(static_cast<useconds_t>(std::atoi(d)) * 1000);
  // The pid file comes first; a daemon that fails later leaves it behind.
  if (FILE* f = std::fopen((pipe_dir() + "/nvidia-cuda-mps-control.pid").c_str(), "w")) {
    std::fprintf(f, "%d", static_cast<int>(getpid()));
    std::fclose(f);
  }
  log_line("Starting control daemon using socket " + pipe_dir() + "/control");
  log_line("To connect CUDA applications to this daemon, set env CUDA_MPS_PIPE_DIRECTORY=" +
           pipe_dir());
  if (env_or("SIMMPS_FAIL", "") == "exclusive_thread") {
    log_line(
        "Failed to start: a device is in compute mode EXCLUSIVE_THREAD or PROHIBITED, which "
        "MPS does not support");
    return 1;
  }
  const sockaddr_un addr = socket_address();
  // A daemon stopped by a signal left its socket file; the lock says no one
  // else serves this directory.
  ::unlink(addr.sun_path);
  const int l = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (l < 0 || ::bind(l, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(l, 16) != 0) {
    log_line(std::string("Failed to listen on the control socket: ") + std::strerror(errno));
    return 1;
  }
  ::chmod(addr.sun_path, 0666);
  return serve(l);
}

int client_mode() {
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.empty()) continue;
    const int s = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const sockaddr_un addr = socket_address();
    if (s < 0 || ::connect(s, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
      std::fprintf(stderr, "Cannot find MPS control daemon process\n");
      return env_or("SIMMPS_CLIENT_EXIT0", "") == "1" ? 0 : 1;
    }
    write_all(s, line + "\n");
    ::shutdown(s, SHUT_WR);
    char buf[4096];
    ssize_t n;
    while ((n = ::read(s, buf, sizeof buf)) > 0)
      std::fwrite(buf, 1, static_cast<size_t>(n), stdout);
    ::close(s);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  ::signal(SIGPIPE, SIG_IGN);
  const std::string arg = argc > 1 ? argv[1] : "";
  if (arg == "-d") return daemon_mode();
  if (arg.empty()) return client_mode();
  std::fprintf(stderr, "Usage: nvidia-cuda-mps-control [-d | -f]\n");
  return 1;
}

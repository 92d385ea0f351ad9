// forkbox-mock: serves a scenario file on 127.0.0.1 for the demo, the benchmarks and
// end-to-end tests. See docs/mock.md.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>

#include "tests/mock/mock_server.h"

namespace {

// Writes `text` to `path` via a temporary file and rename, so readers never see a partial file.
bool WriteAtomically(const std::string& path, const std::string& text, std::string* error) {
  const std::string tmp = path + ".tmp." + std::to_string(getpid());
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    *error = "open " + tmp + ": " + std::strerror(errno);
    return false;
  }
  const bool written = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  const int saved = errno;
  if (close(fd) != 0 || !written) {
    *error = "write " + tmp + ": " + std::strerror(written ? errno : saved);
    unlink(tmp.c_str());
    return false;
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    *error = "rename " + tmp + " -> " + path + ": " + std::strerror(errno);
    unlink(tmp.c_str());
    return false;
  }
  return true;
}

struct Options {
  std::string scenario_path;
  std::string port_file;
  std::string log_path;
  int port = 0;
};

// Blocks the stop signals before any thread starts so only sigwait in Serve receives them.
sigset_t BlockStopSignals() {
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  return stop_signals;
}

// Appends each completed request to `log` as one JSON line.
void LogRequests(forkbox::mock::MockServer* server, FILE* log, std::mutex* log_mu,
                 const std::string& log_path) {
  server->SetObserver([log, log_mu, log_path](const forkbox::mock::RecordedRequest& r) {
    const std::string line =
        r.ToJson().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    std::lock_guard lock(*log_mu);
    if (std::fwrite(line.data(), 1, line.size(), log) != line.size() || std::fflush(log) != 0) {
      std::cerr << "forkbox-mock: writing " << log_path << ": " << std::strerror(errno) << "\n";
    }
  });
}

// Serves the scenario until SIGTERM or SIGINT; returns the exit code. Throws on setup failure.
int Serve(const Options& options, FILE* log, std::mutex* log_mu, const sigset_t& stop_signals) {
  forkbox::mock::MockServer server(options.port);
  server.SetScenario(forkbox::mock::Scenario::FromFile(options.scenario_path));
  if (log) LogRequests(&server, log, log_mu, options.log_path);
  server.Start();
  // The port file first: a reader of the stdout line may then rely on the file too.
  if (!options.port_file.empty()) {
    std::string error;
    if (!WriteAtomically(options.port_file, std::to_string(server.port()) + "\n", &error)) {
      std::cerr << "forkbox-mock: " << error << "\n";
      return 1;
    }
  }
  std::cout << "listening on 127.0.0.1:" << server.port() << std::endl;
  int sig = 0;
  sigwait(&stop_signals, &sig);
  server.Stop();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"forkbox-mock: a scripted Anthropic/OpenAI model server for tests"};
  Options options;
  app.add_option("--scenario", options.scenario_path, "Scenario JSON file (docs/mock.md)")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_option("--port", options.port, "Port on 127.0.0.1 (default: ephemeral)")
      ->check(CLI::Range(0, 65535));
  app.add_option("--port-file", options.port_file,
                 "Write the port here (atomically) once listening");
  app.add_option("--log", options.log_path, "Append each request as one JSON line (keys redacted)");
  CLI11_PARSE(app, argc, argv);

  const sigset_t stop_signals = BlockStopSignals();
  signal(SIGPIPE, SIG_IGN);  // A client that hangs up must not kill the server.

  // The log outlives the server, whose observer writes to it until Stop() returns.
  // "e": O_CLOEXEC.
  std::unique_ptr<FILE, int (*)(FILE*)> log(nullptr, &std::fclose);
  std::mutex log_mu;
  if (!options.log_path.empty()) {
    log.reset(std::fopen(options.log_path.c_str(), "ae"));
    if (!log) {
      std::cerr << "forkbox-mock: cannot open log " << options.log_path << ": "
                << std::strerror(errno) << "\n";
      return 1;
    }
  }
  try {
    return Serve(options, log.get(), &log_mu, stop_signals);
  } catch (const std::exception& e) {
    std::cerr << "forkbox-mock: " << e.what() << "\n";
    return 1;
  }
}

#include "gnuplot.h"

#include <fmt/format.h>

#include <fstream>

#include "child_process.h"

namespace frugal::apps {

std::string GnuplotQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

StatusOr<std::string> RunGnuplot(const std::filesystem::path& script_path,
                                 const std::string& script) {
  {
    std::ofstream out(script_path, std::ios::trunc);
    out << script;
    if (!out) return IoError(fmt::format("cannot write {}", script_path.string()));
  }
  RunCommandOptions options;
  options.timeout = std::chrono::milliseconds(60000);
  auto result = RunCommand({"gnuplot", script_path.string()}, options);
  if (!result.ok()) {
    return FailedPreconditionError(
        fmt::format("plots need gnuplot (Debian gnuplot-nox): {}", result.status().message()));
  }
  if (result->exit_code != 0) {
    return IoError(fmt::format("gnuplot {} failed: {}", script_path.string(), result->output));
  }
  return result->output;
}

}  // namespace frugal::apps

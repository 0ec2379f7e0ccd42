// Drawing with gnuplot (Debian gnuplot-nox) for the command-line layer: quoting strings for its
// scripts, and running a script written to a file. Not thread safe (RunCommand).
#pragma once

#include <filesystem>
#include <string>

#include "frugal/status.h"

namespace frugal::apps {

// s as a gnuplot single-quoted string ('' for a quote).
std::string GnuplotQuote(const std::string& s);

// Writes `script` to `script_path` and runs gnuplot on it (60 s at most). Returns what gnuplot
// printed. kFailedPrecondition when gnuplot is missing, kIoError when the file cannot be written
// or gnuplot fails.
StatusOr<std::string> RunGnuplot(const std::filesystem::path& script_path,
                                 const std::string& script);

}  // namespace frugal::apps

#include "tcp_allowance.h"

#include <fmt/format.h>

#include <fstream>
#include <sstream>

#include "child_process.h"
#include "emulate_state.h"

namespace frugal::apps {
namespace {

// Writes `list` back to the machine and removes `record`.
Status PutBack(const std::string& list, const std::filesystem::path& record) {
  FRUGAL_RETURN_IF_ERROR(SetAllowedCongestionControls(list).Annotate(
      "restoring the machine's allowed TCP congestion controls"));
  std::error_code ec;
  std::filesystem::remove(record, ec);
  if (ec) return IoError(fmt::format("cannot remove {}: {}", record.string(), ec.message()));
  return Status::Ok();
}

}  // namespace

Status SetAllowedCongestionControls(const std::string& list) {
  return RunChecked({"sysctl", "-qw", "net.ipv4.tcp_allowed_congestion_control=" + list});
}

StatusOr<std::string> ReadIpv4Sysctl(const std::string& name) {
  const std::string path = "/proc/sys/net/ipv4/" + name;
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return IoError(fmt::format("cannot read {}", path));
  return line;
}

bool ListsWord(const std::string& list, const std::string& name) {
  std::istringstream words(list);
  for (std::string word; words >> word;) {
    if (word == name) return true;
  }
  return false;
}

StatusOr<bool> TcpAllowance::Allow(const std::string& name) {
  FRUGAL_ASSIGN_OR_RETURN(const std::string allowed,
                          ReadIpv4Sysctl("tcp_allowed_congestion_control"));
  if (ListsWord(allowed, name)) return false;
  // A name the kernel has not loaded cannot be allowed (the kernel loads it when a namespace asks
  // for it, and then refuses it).
  FRUGAL_ASSIGN_OR_RETURN(const std::string available,
                          ReadIpv4Sysctl("tcp_available_congestion_control"));
  if (!ListsWord(available, name)) return false;
  if (!original_) {
    FRUGAL_RETURN_IF_ERROR(
        WriteStateFile(record_, allowed + "\n",
                       std::filesystem::perms::owner_read | std::filesystem::perms::owner_write));
    original_ = allowed;  // from here Restore puts it back and removes the record, whatever fails
  }
  FRUGAL_RETURN_IF_ERROR(SetAllowedCongestionControls(allowed + " " + name)
                             .Annotate(fmt::format("allowing {} in the emulated hosts", name)));
  return true;
}

Status TcpAllowance::Restore() {
  if (!original_) return Status::Ok();
  Status put_back = PutBack(*original_, record_);
  original_.reset();
  return put_back;
}

Status RestoreLeftAllowance(const std::filesystem::path& state_root, const Logger& logger) {
  const std::filesystem::path record = state_root / kAllowanceRecord;
  std::ifstream in(record);
  if (!in) return Status::Ok();
  std::string list;
  std::getline(in, list);
  if (list.empty()) return MalformedError(fmt::format("{} is empty", record.string()));
  FRUGAL_RETURN_IF_ERROR(PutBack(list, record));
  logger.Warning(fmt::format(
      "--emulate: put back the machine's allowed TCP congestion controls ('{}'), which a killed "
      "run had widened",
      list));
  return Status::Ok();
}

TcpAllowance::~TcpAllowance() {
  Status s = Restore();
  if (!s.ok()) logger_.Error(s.ToString());
}

}  // namespace frugal::apps

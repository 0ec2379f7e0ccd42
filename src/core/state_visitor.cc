// Saving and restoring named state (see state_visitor.h).
//
// StateSaver copies every visited value into a record of its type (floats and integers as their
// little-endian bytes). StateLoader looks each visited name up, checks the type (and for Floats the
// count), copies the bytes back and remembers the name as used; Finish reports the first record
// that no visit used. Scopes are a prefix "a/b/" of escaped components; the records below a scope
// are the range of the ordered map that starts with the prefix.
#include "frugal/state_visitor.h"

#include <fmt/format.h>

#include <cstring>

namespace frugal {

std::string_view StateTypeName(StateType type) {
  switch (type) {
    case StateType::kBytes:
      return "bytes";
    case StateType::kF32:
      return "f32";
    case StateType::kF64:
      return "f64";
    case StateType::kU64:
      return "u64";
    case StateType::kI64:
      return "i64";
  }
  return "unknown";
}

size_t StateTypeSize(StateType type) {
  switch (type) {
    case StateType::kBytes:
      return 1;
    case StateType::kF32:
      return 4;
    case StateType::kF64:
    case StateType::kU64:
    case StateType::kI64:
      return 8;
  }
  return 0;
}

std::string EscapeStateName(std::string_view component) {
  std::string out;
  out.reserve(component.size());
  for (char c : component) {
    if (c == '%') {
      out += "%25";
    } else if (c == '/') {
      out += "%2F";
    } else {
      out += c;
    }
  }
  return out;
}

std::string UnescapeStateName(std::string_view component) {
  std::string out;
  out.reserve(component.size());
  for (size_t i = 0; i < component.size(); ++i) {
    if (component.substr(i, 3) == "%25") {
      out += '%';
      i += 2;
    } else if (component.substr(i, 3) == "%2F") {
      out += '/';
      i += 2;
    } else {
      out += component[i];
    }
  }
  return out;
}

StateVisitor::Scope::Scope(StateVisitor& visitor, std::string_view component)
    : visitor_(visitor), length_(visitor.prefix_.size()) {
  visitor_.prefix_ += EscapeStateName(component);
  visitor_.prefix_ += '/';
}

StateVisitor::Scope::~Scope() { visitor_.prefix_.resize(length_); }

void StateVisitor::Reject(std::string_view why) {
  std::string scope = prefix_;
  if (!scope.empty()) scope.pop_back();
  Fail(InvalidArgumentError(fmt::format("field '{}': {}", scope, why)));
}

std::string StateVisitor::Path(std::string_view name) const {
  std::string path = prefix_;
  path += name;
  return path;
}

// ---- StateSaver ----

void StateSaver::Put(std::string_view name, StateType type, std::span<const std::byte> bytes) {
  if (!ok()) return;
  std::string path = Path(name);
  StateRecord record;
  record.type = type;
  record.data.assign(bytes.begin(), bytes.end());
  if (!records_.emplace(path, std::move(record)).second) {
    Fail(InternalError(fmt::format("state field '{}' saved twice", path)));
  }
}

void StateSaver::Floats(std::string_view name, std::span<float> data) {
  Put(name, StateType::kF32, std::as_bytes(data));
}
void StateSaver::FloatVector(std::string_view name, std::vector<float>& data) {
  Put(name, StateType::kF32, std::as_bytes(std::span<const float>(data)));
}
void StateSaver::Bytes(std::string_view name, std::vector<std::byte>& data) {
  Put(name, StateType::kBytes, data);
}
void StateSaver::U64(std::string_view name, uint64_t& value) {
  Put(name, StateType::kU64, std::as_bytes(std::span<const uint64_t>(&value, 1)));
}
void StateSaver::I64(std::string_view name, int64_t& value) {
  Put(name, StateType::kI64, std::as_bytes(std::span<const int64_t>(&value, 1)));
}
void StateSaver::F64(std::string_view name, double& value) {
  Put(name, StateType::kF64, std::as_bytes(std::span<const double>(&value, 1)));
}

void StateSaver::PutSubtree(const StateRecords& records) {
  for (const auto& [name, record] : records) Put(name, record.type, record.data);
}

// ---- StateLoader ----

const StateRecord* StateLoader::Take(std::string_view name, StateType type) {
  if (!ok()) return nullptr;
  std::string path = Path(name);
  auto it = records_.find(path);
  if (it == records_.end()) {
    Fail(InvalidArgumentError(
        fmt::format("field '{}' is missing from the checkpoint (this run has it)", path)));
    return nullptr;
  }
  if (it->second.type != type) {
    Fail(InvalidArgumentError(fmt::format("field '{}' is {} in the checkpoint, this run has {}",
                                          path, StateTypeName(it->second.type),
                                          StateTypeName(type))));
    return nullptr;
  }
  used_.insert(std::move(path));
  return &it->second;
}

void StateLoader::Floats(std::string_view name, std::span<float> data) {
  const StateRecord* r = Take(name, StateType::kF32);
  if (r == nullptr) return;
  if (r->count() != data.size()) {
    Fail(
        InvalidArgumentError(fmt::format("field '{}' holds {} values in the checkpoint, this run "
                                         "has {}",
                                         Path(name), r->count(), data.size())));
    return;
  }
  if (!r->data.empty()) std::memcpy(data.data(), r->data.data(), r->data.size());
}

void StateLoader::FloatVector(std::string_view name, std::vector<float>& data) {
  const StateRecord* r = Take(name, StateType::kF32);
  if (r == nullptr) return;
  data.resize(r->count());
  if (!r->data.empty()) std::memcpy(data.data(), r->data.data(), r->data.size());
}

void StateLoader::Bytes(std::string_view name, std::vector<std::byte>& data) {
  const StateRecord* r = Take(name, StateType::kBytes);
  if (r != nullptr) data = r->data;
}

template <typename T>
void StateLoader::Scalar(std::string_view name, StateType type, T& value) {
  const StateRecord* r = Take(name, type);
  if (r == nullptr) return;
  if (r->data.size() != sizeof(T)) {
    Fail(
        InvalidArgumentError(fmt::format("field '{}' holds {} values in the checkpoint, this run "
                                         "has 1",
                                         Path(name), r->count())));
    return;
  }
  std::memcpy(&value, r->data.data(), sizeof(T));
}

void StateLoader::U64(std::string_view name, uint64_t& value) {
  Scalar(name, StateType::kU64, value);
}
void StateLoader::I64(std::string_view name, int64_t& value) {
  Scalar(name, StateType::kI64, value);
}
void StateLoader::F64(std::string_view name, double& value) {
  Scalar(name, StateType::kF64, value);
}

bool StateLoader::Has(std::string_view component) const {
  const std::string path = Path(EscapeStateName(component));
  if (records_.contains(path)) return true;
  const std::string below = path + "/";
  auto it = records_.lower_bound(below);
  return it != records_.end() && it->first.starts_with(below);
}

std::vector<std::string> StateLoader::Children() const {
  std::set<std::string> names;
  const std::string& scope = prefix();
  for (auto it = records_.lower_bound(scope); it != records_.end(); ++it) {
    if (!it->first.starts_with(scope)) break;
    std::string_view rest = std::string_view(it->first).substr(scope.size());
    names.insert(UnescapeStateName(rest.substr(0, rest.find('/'))));
  }
  return {names.begin(), names.end()};
}

StateRecords StateLoader::TakeSubtree() {
  StateRecords out;
  const std::string& scope = prefix();
  for (auto it = records_.lower_bound(scope); it != records_.end(); ++it) {
    if (!it->first.starts_with(scope)) break;
    out.emplace(it->first.substr(scope.size()), it->second);
    used_.insert(it->first);
  }
  return out;
}

Status StateLoader::Finish() const {
  if (!ok()) return status();
  for (const auto& [name, record] : records_) {
    if (!used_.contains(name)) {
      return InvalidArgumentError(
          fmt::format("field '{}' of the checkpoint is not used by this run", name));
    }
  }
  return Status::Ok();
}

}  // namespace frugal

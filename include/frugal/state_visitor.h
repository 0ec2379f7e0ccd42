// The state a component keeps from one step to the next, visited by name: what a checkpoint saves
// and a resume restores.
//
// Every stateful component (a compressor's per-tensor state, error-feedback residuals, worker
// momentum, a strategy, the step counters of the training loop) implements one method,
// `VisitState(StateVisitor&)`, that names each piece of its state and hands it to the visitor.
// The same method saves (StateSaver: the visitor reads the values) and restores (StateLoader:
// the visitor writes them), so that what is saved and what is restored cannot drift apart:
//
//   void VisitState(StateVisitor& v) {
//     v.U64("round", round_);           // a counter
//     v.Floats("anchor", anchor_);      // a buffer whose size the component fixes
//     v.FloatVector("residual", r_);    // a buffer the saved state sizes on load
//     StateVisitor::Scope scope(v, "clients");   // names below: "clients/..."
//     ...
//   }
//
// Names are paths of components joined by '/'. Scope(v, component) escapes '/' and '%' inside
// the component (EscapeStateName), so that any tensor name is one component; the names given to
// the typed methods are used as they are.
//
// Loading is strict: a record that a component asks for must exist, with the same type and, for
// Floats, the same number of values; a record of the checkpoint that nobody asked for is an error
// too (StateLoader::Finish). All are kInvalidArgument naming the field: the checkpoint belongs to
// another configuration. A failed visit keeps the first error (status()) and turns later visits
// into no-ops, so VisitState implementations need no error handling.
//
// State that is created lazily (a compressor's state exists once its tensor was seen): on load,
// Children() lists the components saved below the current scope, and TakeSubtree() hands the
// records below the current scope to the component, which restores them when it creates the
// state; on save, PutSubtree() writes back records that were loaded but not yet applied.
//
// Thread safety: a visitor is used by one thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "frugal/status.h"

namespace frugal {

// Stable numbers: they are written into checkpoint files.
enum class StateType : uint8_t { kBytes = 1, kF32 = 2, kF64 = 3, kU64 = 4, kI64 = 5 };

// "bytes", "f32", "f64", "u64", "i64"; "unknown" for other values.
std::string_view StateTypeName(StateType type);
// Bytes per value (1 for kBytes); 0 for an unknown type.
size_t StateTypeSize(StateType type);

// One named value or array, little-endian.
struct StateRecord {
  StateType type = StateType::kBytes;
  std::vector<std::byte> data;  // a multiple of StateTypeSize(type) bytes
  uint64_t count() const { return data.size() / StateTypeSize(type); }
  bool operator==(const StateRecord&) const = default;
};

// Records by name, in name order.
using StateRecords = std::map<std::string, StateRecord, std::less<>>;

// A name component with '%' and '/' escaped as %25 and %2F, and its inverse.
std::string EscapeStateName(std::string_view component);
std::string UnescapeStateName(std::string_view component);

class StateVisitor {
 public:
  virtual ~StateVisitor() = default;

  // True for a StateLoader: the typed methods write into the component.
  virtual bool loading() const = 0;

  // A buffer whose size the component fixes. Loading: the record must hold data.size() floats.
  virtual void Floats(std::string_view name, std::span<float> data) = 0;
  // A buffer sized by the state. Loading: resized to the record's count.
  virtual void FloatVector(std::string_view name, std::vector<float>& data) = 0;
  virtual void Bytes(std::string_view name, std::vector<std::byte>& data) = 0;
  virtual void U64(std::string_view name, uint64_t& value) = 0;
  virtual void I64(std::string_view name, int64_t& value) = 0;
  virtual void F64(std::string_view name, double& value) = 0;

  // Loading: whether a record `name`, or records below `name/`, exist under the current scope
  // (`name` is escaped as one component). Saving: false.
  virtual bool Has(std::string_view component) const = 0;
  // Loading: the distinct first components (unescaped, in order) of the records below the
  // current scope. Saving: empty.
  virtual std::vector<std::string> Children() const = 0;
  // Loading: the records below the current scope, with names relative to it, marked as used.
  // Saving: empty.
  virtual StateRecords TakeSubtree() = 0;
  // Saving: stores `records` (names relative to the current scope). Loading: nothing.
  virtual void PutSubtree(const StateRecords& records) = 0;

  // Loading: refuses the checkpoint, kInvalidArgument "field '<scope>': <why>" (the first error
  // is kept). For values a component finds unacceptable.
  void Reject(std::string_view why);

  // The first error met, OK if none.
  const Status& status() const { return status_; }
  bool ok() const { return status_.ok(); }

  // Names below are "<component>/..." (escaped) until the Scope is destroyed. Scopes nest.
  class Scope {
   public:
    Scope(StateVisitor& visitor, std::string_view component);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    StateVisitor& visitor_;
    size_t length_;
  };

 protected:
  // The current scope followed by `name`.
  std::string Path(std::string_view name) const;
  const std::string& prefix() const { return prefix_; }
  void Fail(Status status) {
    if (status_.ok()) status_ = std::move(status);
  }

 private:
  std::string prefix_;  // "" or "a/b/"
  Status status_;
};

// Saves: every visited value becomes a record of records(). Visiting a name twice is an error.
class StateSaver final : public StateVisitor {
 public:
  bool loading() const override { return false; }
  void Floats(std::string_view name, std::span<float> data) override;
  void FloatVector(std::string_view name, std::vector<float>& data) override;
  void Bytes(std::string_view name, std::vector<std::byte>& data) override;
  void U64(std::string_view name, uint64_t& value) override;
  void I64(std::string_view name, int64_t& value) override;
  void F64(std::string_view name, double& value) override;
  bool Has(std::string_view component) const override { return false; }
  std::vector<std::string> Children() const override { return {}; }
  StateRecords TakeSubtree() override { return {}; }
  void PutSubtree(const StateRecords& records) override;

  const StateRecords& records() const { return records_; }
  StateRecords& records() { return records_; }

 private:
  void Put(std::string_view name, StateType type, std::span<const std::byte> bytes);
  StateRecords records_;
};

// Restores from `records`, which must outlive the loader.
class StateLoader final : public StateVisitor {
 public:
  explicit StateLoader(const StateRecords& records) : records_(records) {}

  bool loading() const override { return true; }
  void Floats(std::string_view name, std::span<float> data) override;
  void FloatVector(std::string_view name, std::vector<float>& data) override;
  void Bytes(std::string_view name, std::vector<std::byte>& data) override;
  void U64(std::string_view name, uint64_t& value) override;
  void I64(std::string_view name, int64_t& value) override;
  void F64(std::string_view name, double& value) override;
  bool Has(std::string_view component) const override;
  std::vector<std::string> Children() const override;
  StateRecords TakeSubtree() override;
  void PutSubtree(const StateRecords& records) override {}

  // status() if a visit failed; else kInvalidArgument naming the first record nobody used.
  Status Finish() const;

 private:
  // The record `name` of `type`, marked used; nullptr (and an error kept) when it is missing or
  // of another type.
  const StateRecord* Take(std::string_view name, StateType type);
  template <typename T>
  void Scalar(std::string_view name, StateType type, T& value);

  const StateRecords& records_;
  std::set<std::string, std::less<>> used_;
};

}  // namespace frugal

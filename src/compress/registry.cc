#include <fmt/format.h>

#include "compress/register.h"
#include "frugal/compressor.h"

namespace frugal {

Status CompressorRegistry::Register(CompressorEntry entry) {
  if (entry.name.empty() || !entry.factory) {
    return InvalidArgumentError("a compressor needs a name and a factory");
  }
  if (entries_.count(entry.name) != 0) {
    return InvalidArgumentError(fmt::format("compressor '{}' registered twice", entry.name));
  }
  std::string name = entry.name;
  entries_.emplace(std::move(name), std::move(entry));
  return Status::Ok();
}

StatusOr<std::unique_ptr<Compressor>> CompressorRegistry::Create(std::string_view spec) const {
  if (spec.find('|') != std::string_view::npos) {
    return compress_internal::CreateComposition(*this, spec);
  }
  FRUGAL_ASSIGN_OR_RETURN(CompressorParams params, CompressorParams::Parse(spec));
  auto it = entries_.find(params.name());
  if (it == entries_.end()) {
    return NotFoundError(fmt::format("unknown compressor '{}' (accepted: {})", params.name(),
                                     fmt::join(Names(), ", ")));
  }
  FRUGAL_ASSIGN_OR_RETURN(bool ef, params.Bool("ef", it->second.error_feedback_by_default));
  FRUGAL_ASSIGN_OR_RETURN(std::unique_ptr<Compressor> compressor, it->second.factory(params));
  FRUGAL_RETURN_IF_ERROR(params.Finish());
  FRUGAL_INTERNAL_ASSERT(compressor != nullptr, "factory of ", params.name(), " returned null");
  if (ef) compressor = WithErrorFeedback(std::move(compressor));
  return compressor;
}

bool CompressorRegistry::Contains(std::string_view name) const {
  return entries_.find(name) != entries_.end();
}

std::vector<std::string> CompressorRegistry::Names() const {
  std::vector<std::string> names;
  for (const auto& [name, entry] : entries_) names.push_back(name);
  return names;
}

const CompressorEntry* CompressorRegistry::Find(std::string_view name) const {
  auto it = entries_.find(name);
  return it == entries_.end() ? nullptr : &it->second;
}

CompressorRegistry DefaultCompressorRegistry() {
  CompressorRegistry registry;
  RegisterQuantizers(registry);
  RegisterSparsifiers(registry);
  RegisterLowRank(registry);
  RegisterSketches(registry);
  RegisterCoding(registry);
  return registry;
}

}  // namespace frugal

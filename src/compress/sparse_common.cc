#include "compress/sparse_common.h"

#include <fmt/format.h>

#include <cstring>

#include "compress/sparse_coding.h"

// Sparse payloads.
//
// WriteSparsePayload plans the index code first (PlanIndexCode), so the body size is known before
// anything is written: 4 * scalars + IndexSectionBytes(plan) + 4 * count (values) +
// ceil(count / 8) (signs). It then fills the body in place behind the wire header. The reader
// checks the header (OpenPayload), the scalars' presence, the index section (count, codes,
// range, order, padding), the value and sign sections, and finally that nothing is left over.
namespace frugal::sparse {
namespace {

const TensorInfo& ScratchTensor() {
  static const TensorInfo kTensor("frugal.sparse.scratch", 0);
  return kTensor;
}

}  // namespace

Status SparseCompressorBase::CheckIndexable(const TensorInfo& tensor) const {
  if (tensor.numel > UINT32_MAX) {
    return InvalidArgumentError(
        fmt::format("{}: tensor '{}' has {} elements; sparse indices are 32-bit", name_,
                    tensor.name, tensor.numel));
  }
  return Status::Ok();
}

size_t KeepCount::For(size_t numel) const {
  if (numel == 0) return 0;
  if (k > 0) return std::min(static_cast<size_t>(k), numel);
  return KFromRatio(ratio, numel);
}

std::string FormatParam(double v) { return fmt::format("{}", v); }

std::string KeepCount::Canonical() const {
  return k > 0 ? fmt::format("k={}", k) : fmt::format("ratio={}", FormatParam(ratio));
}

StatusOr<KeepCount> ParseKeepCount(CompressorParams& params, double default_ratio) {
  KeepCount count;
  bool has_ratio = params.Has("ratio");
  bool has_k = params.Has("k");
  if (has_ratio && has_k) {
    return InvalidArgumentError(
        fmt::format("{}: give either ratio= or k=, not both", params.name()));
  }
  FRUGAL_ASSIGN_OR_RETURN(count.ratio, params.Double("ratio", default_ratio, 1e-9, 1.0));
  if (!(count.ratio > 0)) {
    return InvalidArgumentError(fmt::format("{}: ratio must be > 0", params.name()));
  }
  FRUGAL_ASSIGN_OR_RETURN(count.k, params.Int("k", 0, 1, int64_t{1} << 32));
  return count;
}

SparseScratch& Scratch(CompressContext& ctx) {
  return ctx.State<SparseScratch>(ScratchTensor(), "sparse.scratch");
}

std::string_view SelectMethodName(SelectMethod method) {
  return method == SelectMethod::kExact ? "exact" : "sampled";
}

StatusOr<SelectMethod> ParseSelectMethod(CompressorParams& params, SelectMethod fallback) {
  FRUGAL_ASSIGN_OR_RETURN(
      std::string name, params.Choice("select", SelectMethodName(fallback), {"exact", "sampled"}));
  return name == "exact" ? SelectMethod::kExact : SelectMethod::kSampled;
}

void SelectTopK(std::span<const float> x, size_t k, SelectMethod method, double sample_ratio,
                const RngKey& rng_key, TopKSelector& selector, SparseVector* out) {
  if (method == SelectMethod::kExact) {
    selector.SelectExact(x, k, out);
    return;
  }
  RngStream rng(rng_key);
  SampledSelectOptions options;
  options.sample_ratio = sample_ratio;
  selector.SelectSampled(x, k, rng, options, out);
}

void WriteSparsePayload(const Compressor& compressor, const TensorInfo& tensor,
                        std::span<const float> scalars, const SparseVector& entries,
                        const SparseLayout& layout, std::vector<std::byte>& out) {
  FRUGAL_CHECK_EQ(scalars.size(), layout.scalars, "sparse payload scalars");
  const size_t count = entries.size();
  IndexCodePlan plan = PlanIndexCode(entries.indices, tensor.numel);
  size_t body_bytes = 4 * layout.scalars + IndexSectionBytes(plan) +
                      (layout.values ? 4 * count : 0) +
                      (layout.signs ? SignSectionBytes(count) : 0);
  std::span<std::byte> body = BeginPayload(compressor, tensor, body_bytes, out);
  std::byte* at = body.data();
  if (!scalars.empty()) std::memcpy(at, scalars.data(), 4 * scalars.size());
  at += 4 * scalars.size();
  at += WriteIndexSection(entries.indices, tensor.numel, plan, at);
  if (layout.values && count > 0) {
    std::memcpy(at, entries.values.data(), 4 * count);
    at += 4 * count;
  }
  if (layout.signs) {
    std::fill(at, at + SignSectionBytes(count), std::byte{0});
    for (size_t i = 0; i < count; ++i) {
      if (std::signbit(entries.values[i])) at[i / 8] |= static_cast<std::byte>(1u << (i % 8));
    }
    at += SignSectionBytes(count);
  }
  FRUGAL_INTERNAL_ASSERT(at == body.data() + body.size(), "sparse body size mismatch");
}

Status ReadSparsePayload(std::span<const std::byte> payload, const Compressor& compressor,
                         const TensorInfo& tensor, const SparseLayout& layout, size_t max_count,
                         SparseBody* out) {
  FRUGAL_ASSIGN_OR_RETURN(std::span<const std::byte> body,
                          OpenPayload(payload, compressor, tensor));
  const std::string name(compressor.name());
  if (body.size() < 4 * layout.scalars) {
    return MalformedError(fmt::format("{} payload: body of {} bytes has no room for {} scalars",
                                      name, body.size(), layout.scalars));
  }
  out->scalars.resize(layout.scalars);
  if (layout.scalars > 0) std::memcpy(out->scalars.data(), body.data(), 4 * layout.scalars);
  size_t at = 4 * layout.scalars;
  auto index_bytes =
      ReadIndexSection(body.subspan(at), tensor.numel, max_count, &out->entries.indices);
  if (!index_bytes.ok()) return index_bytes.status().Annotate(name + " payload");
  at += *index_bytes;
  const size_t count = out->entries.indices.size();
  if (layout.values) {
    auto value_bytes = ReadFloats(body.subspan(at), count, &out->entries.values);
    if (!value_bytes.ok()) return value_bytes.status().Annotate(name + " payload");
    at += *value_bytes;
  } else {
    out->entries.values.clear();
  }
  if (layout.signs) {
    auto sign_bytes = ReadSigns(body.subspan(at), count, &out->negative);
    if (!sign_bytes.ok()) return sign_bytes.status().Annotate(name + " payload");
    at += *sign_bytes;
  } else {
    out->negative.clear();
  }
  if (at != body.size()) {
    return MalformedError(
        fmt::format("{} payload: {} bytes after the last section", name, body.size() - at));
  }
  return Status::Ok();
}

std::string TopKParams::Canonical() const {
  return fmt::format("{},sample={},select={}", count.Canonical(), FormatParam(sample),
                     SelectMethodName(method));
}

StatusOr<TopKParams> ParseTopKParams(CompressorParams& params) {
  TopKParams p;
  FRUGAL_ASSIGN_OR_RETURN(p.count, ParseKeepCount(params, 0.01));
  FRUGAL_ASSIGN_OR_RETURN(p.method, ParseSelectMethod(params, SelectMethod::kExact));
  FRUGAL_ASSIGN_OR_RETURN(p.sample, params.Double("sample", 0.01, 1e-6, 1.0));
  return p;
}

TopKSelectingCompressor::TopKSelectingCompressor(std::string_view name, CompressorId id,
                                                 CompressorTraits traits,
                                                 std::string_view params_prefix,
                                                 const TopKParams& p)
    : SparseCompressorBase(name, id, traits, std::string(params_prefix) + p.Canonical()), p_(p) {}

void TopKSelectingCompressor::Select(std::span<const float> x, const TensorInfo& tensor,
                                     CompressContext& ctx, SparseVector* out) const {
  SelectTopK(x, KeepFor(tensor.numel), p_.method, p_.sample, ctx.Key(tensor), Scratch(ctx).selector,
             out);
}

StatusOr<const SparseVector*> TopKSelectingCompressor::SelectInput(std::span<const float> input,
                                                                   const TensorInfo& tensor,
                                                                   CompressContext& ctx) const {
  CheckSize(input.size(), tensor);
  FRUGAL_RETURN_IF_ERROR(CheckIndexable(tensor));
  SparseVector* picked = &Scratch(ctx).picked;
  Select(input, tensor, ctx, picked);
  return picked;
}

std::optional<uint64_t> TopKValuesCompressor::MaxBodyBits(const TensorInfo& tensor) const {
  const size_t k = KeepFor(tensor.numel);
  return 8 * static_cast<uint64_t>(MaxIndexSectionBytes(k, tensor.numel) + 4 * k);
}

Status TopKValuesCompressor::Encode(std::span<const float> input, const TensorInfo& tensor,
                                    CompressContext& ctx, std::vector<std::byte>& out) const {
  FRUGAL_ASSIGN_OR_RETURN(const SparseVector* picked, SelectInput(input, tensor, ctx));
  WriteSparsePayload(*this, tensor, {}, *picked, kLayout, out);
  return Status::Ok();
}

Status TopKValuesCompressor::DecodeScaled(std::span<const std::byte> payload,
                                          const TensorInfo& tensor, CompressContext& ctx,
                                          float scale, std::span<float> output) const {
  CheckSize(output.size(), tensor);
  SparseBody& body = Scratch(ctx).body;
  FRUGAL_RETURN_IF_ERROR(
      ReadSparsePayload(payload, *this, tensor, kLayout, KeepFor(tensor.numel), &body));
  const SparseVector& e = body.entries;
  for (size_t i = 0; i < e.size(); ++i) output[e.indices[i]] += scale * e.values[i];
  return Status::Ok();
}

}  // namespace frugal::sparse

// The extension module frugal._frugal: the C++ side of the Python package (python/frugal/).
// The Python modules give it the Horovod-compatible API; this file only converts: Status to
// exceptions (ValueError for bad arguments and refused combinations, FrugalError, a
// RuntimeError, for what fails while running), and releases the GIL around every wait.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/extension.h>

#include <memory>
#include <stdexcept>
#include <string>

#include "collective_ops.h"
#include "frugal/check.h"
#include "frugal/logging.h"
#include "frugal/mpi_transport.h"
#include "gradient_exchange.h"
#include "runtime.h"

namespace py = pybind11;

namespace frugal_py {
namespace {

class FrugalError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Refusals of what the caller asked for: kInvalidArgument and kNotFound become ValueError with
// the Status's one line; anything else is a FrugalError.
[[noreturn]] void RaiseRefusal(const frugal::Status& status) {
  if (status.code() == frugal::StatusCode::kInvalidArgument ||
      status.code() == frugal::StatusCode::kNotFound) {
    throw py::value_error(status.message());
  }
  throw FrugalError(status.ToString());
}

void ThrowIfError(const frugal::Status& status) {
  if (!status.ok()) throw FrugalError(status.ToString());
}

class Mpi {
 public:
  Mpi() {
    auto runtime = frugal::MpiRuntime::InitOrAdopt(nullptr, nullptr);
    if (!runtime.ok()) throw FrugalError(runtime.status().ToString());
    runtime_ = std::move(*runtime);
  }
  frugal::MpiRuntime& get() {
    if (!runtime_) throw FrugalError("MPI was finalised");
    return *runtime_;
  }
  bool owns_mpi() const { return runtime_ && runtime_->owns_mpi(); }
  void Finalize() { runtime_.reset(); }

 private:
  std::unique_ptr<frugal::MpiRuntime> runtime_;
};

// The handle of a collective in flight.
class Handle {
 public:
  Handle(std::shared_ptr<Runtime> runtime, std::shared_ptr<OpRecord> record,
         std::unique_ptr<frugal::Work> work)
      : runtime_(std::move(runtime)), record_(std::move(record)), work_(std::move(work)) {}

  bool Poll() { return done_ || work_->IsCompleted(); }

  // The op's result: the reduced or broadcast tensor, or the gathered one.
  torch::Tensor Wait() {
    if (!done_) {
      {
        py::gil_scoped_release release;
        status_ = work_->Wait(runtime_->wait_timeout());
      }
      done_ = true;
      if (!status_.ok()) runtime_->ForgetOp(record_->id);
    }
    ThrowIfError(status_);
    return record_->op.kind == OpKind::kAllgather ? record_->op.output : record_->op.tensor;
  }

 private:
  std::shared_ptr<Runtime> runtime_;
  std::shared_ptr<OpRecord> record_;
  std::unique_ptr<frugal::Work> work_;
  bool done_ = false;
  frugal::Status status_;
};

std::shared_ptr<Runtime> StartRuntime(Mpi& mpi, double timeout_s, const std::string& log_level) {
  RuntimeOptions options;
  options.timeout = frugal::Duration(static_cast<int64_t>(timeout_s * 1000));
  auto level = frugal::ParseLogLevel(log_level);
  if (!level.ok()) RaiseRefusal(level.status());
  options.log_level = *level;
  frugal::MpiRuntime& runtime_of_mpi = mpi.get();
  frugal::StatusOr<std::unique_ptr<Runtime>> runtime = [&] {
    py::gil_scoped_release release;
    return Runtime::Start(runtime_of_mpi, options);
  }();
  if (!runtime.ok()) RaiseRefusal(runtime.status());
  return std::shared_ptr<Runtime>(std::move(*runtime));
}

std::unique_ptr<Handle> Submit(const std::shared_ptr<Runtime>& runtime, int kind,
                               const torch::Tensor& tensor, const std::string& name, bool sum,
                               double prescale, double postscale, int root) {
  auto record = std::make_shared<OpRecord>();
  record->op.kind = static_cast<OpKind>(kind);
  record->op.name = name;
  record->op.tensor = tensor;
  record->op.reduce = sum ? ReduceKind::kSum : ReduceKind::kAverage;
  record->op.prescale = prescale;
  record->op.postscale = postscale;
  record->op.root = root;
  const frugal::Status valid = ValidateOp(record->op, runtime->size());
  if (!valid.ok()) RaiseRefusal(valid);
  if (!tensor.is_contiguous()) throw py::value_error("frugal: the tensor must be contiguous");
  std::unique_ptr<frugal::Work> work = runtime->SubmitOp(record);
  return std::make_unique<Handle>(runtime, std::move(record), std::move(work));
}

std::shared_ptr<GradientExchange> MakeExchange(const std::shared_ptr<Runtime>& runtime,
                                               const std::vector<std::string>& names,
                                               const std::vector<std::vector<int64_t>>& shapes,
                                               const py::dict& kw) {
  ExchangeOptions options;
  options.names = names;
  options.shapes = shapes;
  frugal::StrategyOptions& s = options.strategy;
  s.arch = kw["arch"].cast<std::string>();
  s.sync = kw["sync"].cast<std::string>();
  s.compress = kw["compress"].cast<std::string>();
  s.error_feedback = kw["ef"].cast<bool>();
  s.worker_momentum = kw["worker_momentum"].cast<bool>();
  s.aggregate = kw["aggregate"].cast<std::string>();
  s.compress_min_bytes = kw["compress_min_bytes"].cast<size_t>();
  s.momentum = kw["momentum"].cast<double>();
  s.nesterov = kw["nesterov"].cast<bool>();
  s.skip_comm = kw["skip_comm"].cast<bool>();
  s.seed = kw["seed"].cast<uint64_t>();
  s.timeout = runtime->options().timeout;
  options.overlap = kw["overlap"].cast<std::string>();
  options.fusion = kw["fusion"].cast<std::string>();
  options.steps_per_epoch = kw["steps_per_epoch"].cast<int64_t>();
  // Refusals before anything collective, so that every rank raises the same ValueError.
  const auto plan = PlanExchange(options);
  if (!plan.ok()) RaiseRefusal(plan.status());
  frugal::StatusOr<std::unique_ptr<GradientExchange>> exchange = [&] {
    py::gil_scoped_release release;
    return GradientExchange::Create(*runtime, std::move(options));
  }();
  if (!exchange.ok()) RaiseRefusal(exchange.status());
  return std::shared_ptr<GradientExchange>(std::move(*exchange));
}

}  // namespace
}  // namespace frugal_py

PYBIND11_MODULE(_frugal, m) {
  using namespace frugal_py;
  m.doc() = "frugal's engine for the frugal.torch package";
  static py::exception<FrugalError> frugal_error(m, "FrugalError", PyExc_RuntimeError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const FrugalError& e) {
      frugal_error(e.what());
    } catch (const frugal::CheckError& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    }
  });
  m.attr("ALLREDUCE") = static_cast<int>(OpKind::kAllreduce);
  m.attr("ALLGATHER") = static_cast<int>(OpKind::kAllgather);
  m.attr("BROADCAST") = static_cast<int>(OpKind::kBroadcast);

  py::class_<Mpi>(m, "Mpi")
      .def(py::init<>())
      .def_property_readonly("owns_mpi", &Mpi::owns_mpi)
      .def("finalize", &Mpi::Finalize);

  py::class_<Runtime, std::shared_ptr<Runtime>>(m, "Runtime")
      .def_property_readonly("rank", &Runtime::rank)
      .def_property_readonly("size", &Runtime::size)
      .def_property_readonly("local_rank", &Runtime::local_rank)
      .def_property_readonly("local_size", &Runtime::local_size)
      .def("stop", [](Runtime& rt) {
        frugal::Status status;
        {
          py::gil_scoped_release release;
          status = rt.Stop();
        }
        ThrowIfError(status);
      });
  m.def("start", &StartRuntime, py::arg("mpi"), py::arg("timeout_s"), py::arg("log_level"));

  py::class_<Handle>(m, "Handle").def("poll", &Handle::Poll).def("wait", &Handle::Wait);
  m.def("submit", &Submit, py::arg("runtime"), py::arg("kind"), py::arg("tensor"), py::arg("name"),
        py::arg("sum"), py::arg("prescale"), py::arg("postscale"), py::arg("root"));

  py::class_<GradientExchange, std::shared_ptr<GradientExchange>>(m, "Exchange")
      .def_property_readonly("optimizer_momentum",
                             [](const GradientExchange& e) { return e.plan().optimizer_momentum; })
      .def_property_readonly("optimizer_nesterov",
                             [](const GradientExchange& e) { return e.plan().optimizer_nesterov; })
      .def_property_readonly("strategy", &GradientExchange::strategy_name)
      .def_property_readonly("reducer", &GradientExchange::reducer_name)
      .def_property_readonly("identical_replicas", &GradientExchange::identical_replicas)
      .def_property_readonly(
          "submits_after_backward",
          [](const GradientExchange& e) { return e.overlap() == frugal::OverlapMode::kNone; })
      .def_property_readonly("strategy_bytes", &GradientExchange::strategy_bytes)
      .def("averages_gradients", &GradientExchange::AveragesGradients)
      .def("submit", &GradientExchange::Submit)
      .def("wait",
           [](GradientExchange& e, const std::vector<size_t>& indices) {
             frugal::Status status;
             {
               py::gil_scoped_release release;
               status = e.Wait(indices);
             }
             ThrowIfError(status);
           })
      .def("wait_all",
           [](GradientExchange& e) {
             frugal::Status status;
             {
               py::gil_scoped_release release;
               status = e.WaitAll();
             }
             ThrowIfError(status);
           })
      .def("begin",
           [](GradientExchange& e, const std::vector<torch::Tensor>& params,
              const std::vector<torch::Tensor>& momenta) {
             frugal::Status status;
             {
               py::gil_scoped_release release;
               status = e.Begin(params, momenta);
             }
             if (!status.ok()) RaiseRefusal(status);
           })
      .def("after_step",
           [](GradientExchange& e, uint64_t step, const std::vector<torch::Tensor>& params,
              const std::vector<torch::Tensor>& momenta) {
             frugal::Status status;
             {
               py::gil_scoped_release release;
               status = e.AfterStep(step, params, momenta);
             }
             ThrowIfError(status);
           });
  m.def("make_exchange", &MakeExchange, py::arg("runtime"), py::arg("names"), py::arg("shapes"),
        py::arg("options"));
}

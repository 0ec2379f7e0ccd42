// The TCP settings MpiRuntime::Init gives Open MPI, read back from the library itself through the
// MPI tool information interface (MPI_T control variables), so the test sees what the TCP
// transport of this job really uses.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdlib>
#include <string>

#include "frugal/mpi_transport.h"

namespace frugal {
namespace {

// The value of Open MPI's control variable `name` (an integer of any width), or -1 if the
// library does not know it.
long long ControlVariable(const std::string& name) {
  int provided = 0;
  EXPECT_EQ(MPI_T_init_thread(MPI_THREAD_SINGLE, &provided), MPI_SUCCESS);
  int index = -1;
  long long value = -1;
  if (MPI_T_cvar_get_index(name.c_str(), &index) == MPI_SUCCESS) {
    char cvar_name[256];
    int name_len = sizeof(cvar_name);
    int verbosity = 0;
    MPI_Datatype type = MPI_DATATYPE_NULL;
    MPI_T_enum enumtype = MPI_T_ENUM_NULL;
    int desc_len = 0;
    int bind = 0;
    int scope = 0;
    MPI_T_cvar_get_info(index, cvar_name, &name_len, &verbosity, &type, &enumtype, nullptr,
                        &desc_len, &bind, &scope);
    MPI_T_cvar_handle handle;
    int count = 0;
    EXPECT_EQ(MPI_T_cvar_handle_alloc(index, nullptr, &handle, &count), MPI_SUCCESS);
    if (type == MPI_INT) {
      int v = 0;
      MPI_T_cvar_read(handle, &v);
      value = v;
    } else if (type == MPI_UNSIGNED) {
      unsigned v = 0;
      MPI_T_cvar_read(handle, &v);
      value = v;
    } else if (type == MPI_UNSIGNED_LONG || type == MPI_LONG) {
      unsigned long v = 0;
      MPI_T_cvar_read(handle, &v);
      value = static_cast<long long>(v);
    } else if (type == MPI_UNSIGNED_LONG_LONG || type == MPI_LONG_LONG) {
      unsigned long long v = 0;
      MPI_T_cvar_read(handle, &v);
      value = static_cast<long long>(v);
    } else {
      ADD_FAILURE() << name << " has a type this test does not read";
    }
    MPI_T_cvar_handle_free(&handle);
  }
  MPI_T_finalize();
  return value;
}

// Run over TCP without any --mca btl_tcp_* setting: frugal's values.
TEST(MpiTransportTcp, EagerLimitAndLargestSendAreFrugals) {
  EXPECT_EQ(ControlVariable("btl_tcp_eager_limit"), static_cast<long long>(kTcpEagerBytes));
  EXPECT_EQ(ControlVariable("btl_tcp_max_send_size"), static_cast<long long>(kTcpEagerBytes));
}

// Run with `mpirun --mca btl_tcp_eager_limit 70000`: the job's setting is kept, frugal's
// default still fills the one the job did not set.
TEST(MpiTcpJobSettings, AJobsOwnEagerLimitIsKept) {
  EXPECT_EQ(ControlVariable("btl_tcp_eager_limit"), 70000);
  EXPECT_EQ(ControlVariable("btl_tcp_max_send_size"), static_cast<long long>(kTcpEagerBytes));
}

}  // namespace
}  // namespace frugal
